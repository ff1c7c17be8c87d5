module github.com/axsched/ax/events

go 1.26.8

require github.com/axsched/ax/contracts v0.0.0

replace github.com/axsched/ax/contracts => ../contracts
