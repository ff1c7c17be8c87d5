module github.com/axsched/ax/events

go 1.26.8

require github.com/axsched/ax/contracts v0.0.0

require (
	github.com/segmentio/asm v1.1.3 // indirect
	github.com/segmentio/encoding v0.5.4
	golang.org/x/sys v0.0.0-20211110154304-99a53858aa08 // indirect
)

replace github.com/axsched/ax/contracts => ../contracts
