package contracts

import "time"

// DeadLetter is a task that failed for good (out of retries or not
// retryable) and waits for an operator.
type DeadLetter struct {
	ID         string    `json:"id"`
	TaskID     string    `json:"task_id"`
	Type       string    `json:"type"`
	Status     Status    `json:"status"`
	Attempt    int       `json:"attempt"`
	RetryCount int       `json:"retry_count"`
	LastError  string    `json:"last_error"`
	CreatedAt  time.Time `json:"created_at"`
	// RetriedAt and RetriedBy are set once an operator re-ran the task.
	RetriedAt *time.Time `json:"retried_at,omitempty"`
	RetriedBy string     `json:"retried_by,omitempty"`
}

// DeadLetterList is the body of GET /v1/deadletters, newest first.
type DeadLetterList struct {
	DeadLetters []DeadLetter `json:"dead_letters"`
	// NextBefore pages on: pass it as ?before= for older letters.
	NextBefore string `json:"next_before,omitempty"`
}
