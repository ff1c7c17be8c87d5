module github.com/axsched/ax/contracts

go 1.26.8
