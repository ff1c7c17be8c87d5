package bus

// PublishWaitMax lets tests shorten publishWaitMax.
var PublishWaitMax = &publishWaitMax

// The fast batch wire constants, for the conformance test.
const (
	FastOpStart          = fastOpStart
	FastOpAppend         = fastOpAppend
	FastOpCommit         = fastOpCommit
	FastBatchFlow        = fastBatchFlow
	ErrCodeBatchDisabled = errCodeBatchDisabled
)

// FastBatchServer is fastBatchServer.
var FastBatchServer = fastBatchServer
