package bus

// PublishWaitMax lets tests shorten publishWaitMax.
var PublishWaitMax = &publishWaitMax
