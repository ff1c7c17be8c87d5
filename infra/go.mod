module github.com/axsched/ax/infra

go 1.26.8
