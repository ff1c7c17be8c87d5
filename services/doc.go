// Package services is the root of ax's service module. It holds no code of
// its own; its test checks that the packages below it import one another
// only downwards, floor by floor:
//
//	wiring and tools   cmd/ax, app, bench, demo, worker, examples/...
//	the five services  submitter, timer, dispatcher, executor, reaper
//	shared runtime     internal/... (store, bus, outbox, dispatch, ...)
//	events             github.com/axsched/ax/events
//	contracts, infra   github.com/axsched/ax/contracts/..., infra/...
//
// A package may import its own floor or any floor below; no service imports
// another (they talk over NATS); contracts and infra import nothing of ax.
// docs/architecture.md draws the same picture.
package services
