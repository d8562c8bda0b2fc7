package dra

import (
	"context"
	"log/slog"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	resourceinformers "k8s.io/client-go/informers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// DefaultGrace is how long a device stays on the node's system after its
// claim let it go, for a pod that comes back (a restart, a rollout).
const DefaultGrace = 30 * time.Second

// RunAttacher watches ResourceClaims and reconciles each one whose
// allocation or status changed (Attacher.Reconcile), one at a time per
// claim, retrying a failed reconcile with backoff, until ctx ends; a claim
// deleted or deallocated has its devices released (Attacher.Release) grace
// later. It returns once the informer stopped.
func RunAttacher(ctx context.Context, a *Attacher, grace time.Duration, log *slog.Logger) {
	// The claims' informer alone: the factory of every group's informers
	// would link them all into the binary.
	inf := resourceinformers.NewResourceClaimInformer(a.Kube, metav1.NamespaceAll, 0, cache.Indexers{})
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](10*time.Millisecond, 5*time.Second))
	defer q.ShutDown()
	enqueue := func(obj any) {
		if c, ok := obj.(*resourceapi.ResourceClaim); ok && c.Status.Allocation != nil {
			if key, err := cache.MetaNamespaceKeyFunc(c); err == nil {
				q.Add(key)
			}
		}
	}
	var mu sync.Mutex
	releasing := map[string]*resourceapi.ResourceClaim{} // "release/" + UID → the claim as it was
	release := func(old any) {
		if d, ok := old.(cache.DeletedFinalStateUnknown); ok {
			old = d.Obj
		}
		c, ok := old.(*resourceapi.ResourceClaim)
		if !ok || c.Status.Allocation == nil {
			return
		}
		key := "release/" + string(c.UID)
		mu.Lock()
		releasing[key] = c.DeepCopy()
		mu.Unlock()
		q.AddAfter(key, grace)
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, obj any) {
			if o, n := old.(*resourceapi.ResourceClaim), obj.(*resourceapi.ResourceClaim); o.Status.Allocation != nil && n.Status.Allocation == nil {
				release(o)
				return
			}
			enqueue(obj)
		},
		DeleteFunc: release,
	})
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for {
			key, quit := q.Get()
			if quit {
				return
			}
			var err error
			mu.Lock()
			old, isRelease := releasing[key]
			mu.Unlock()
			if isRelease {
				if err = a.Release(ctx, old); err == nil {
					mu.Lock()
					delete(releasing, key)
					mu.Unlock()
				}
			} else {
				var obj any
				var exists bool
				obj, exists, err = inf.GetIndexer().GetByKey(key)
				if err == nil && exists {
					err = a.Reconcile(ctx, obj.(*resourceapi.ResourceClaim))
				}
			}
			if err != nil {
				log.Warn("dra: reconcile a claim; retrying", "claim", key, "err", err)
				q.AddRateLimited(key)
			} else {
				q.Forget(key)
			}
			q.Done(key)
		}
	}, time.Second)
	<-ctx.Done()
}
