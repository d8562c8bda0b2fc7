package dra

import (
	"context"
	"log/slog"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// RunAttacher watches ResourceClaims and reconciles each one whose
// allocation or status changed (Attacher.Reconcile), one at a time per
// claim, retrying a failed reconcile with backoff, until ctx ends. It
// returns once the informer stopped.
func RunAttacher(ctx context.Context, a *Attacher, log *slog.Logger) {
	factory := informers.NewSharedInformerFactory(a.Kube, 0)
	inf := factory.Resource().V1().ResourceClaims().Informer()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](10*time.Millisecond, 5*time.Second))
	defer q.ShutDown()
	enqueue := func(obj any) {
		if c, ok := obj.(*resourceapi.ResourceClaim); ok && c.Status.Allocation != nil {
			if key, err := cache.MetaNamespaceKeyFunc(c); err == nil {
				q.Add(key)
			}
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for {
			key, quit := q.Get()
			if quit {
				return
			}
			obj, exists, err := inf.GetIndexer().GetByKey(key)
			if err == nil && exists {
				err = a.Reconcile(ctx, obj.(*resourceapi.ResourceClaim))
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
	factory.Shutdown()
}
