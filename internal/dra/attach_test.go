package dra

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"rackpool/api"
)

// TestReconcileTransient: a rackpool that cannot be reached, or answers
// 503, decides nothing, so the claim's status is not written and Reconcile
// fails (the queue retries); a refusal is an answer: AttachFailed.
func TestReconcileTransient(t *testing.T) {
	var status int
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":{"code":"Base.1.22.GeneralError","message":"no"}}`))
	}))
	closed := httptest.NewTLSServer(http.NotFoundHandler())
	closed.Close()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{HostLabel: "host1"}}}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "r", Driver: DriverName, Pool: "falcon1", Device: "gpu1", BindingConditions: []string{ConditionAttached}}}},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"worker-1"}}}}}}}}}
	for _, tc := range []struct {
		name      string
		url       string
		status    int
		written   bool
		condition string
	}{
		{"unreachable", closed.URL, 0, false, ""},
		{"unavailable", srv.URL, http.StatusServiceUnavailable, false, ""},
		{"refused", srv.URL, http.StatusConflict, true, ConditionAttachFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status = tc.status
			kube := fake.NewClientset(node, claim.DeepCopy())
			a := &Attacher{Kube: kube, Rackpool: &api.Client{URL: tc.url, HTTP: srv.Client()},
				BlockOf: func(pool, device string) (string, bool) { return device, true }}
			err := a.Reconcile(context.Background(), claim)
			got, _ := kube.ResourceV1().ResourceClaims("ns").Get(context.Background(), "c", metav1.GetOptions{})
			written := len(got.Status.Devices) > 0
			if written != tc.written || (err == nil) != tc.written {
				t.Fatalf("Reconcile: %v; status written %v, want %v", err, written, tc.written)
			}
			if written && got.Status.Devices[0].Conditions[0].Type != tc.condition {
				t.Errorf("condition %+v, want %s", got.Status.Devices[0].Conditions, tc.condition)
			}
		})
	}
}
