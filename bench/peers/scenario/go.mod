module github.com/agentry-dev/agentry/bench/peers/scenario

go 1.26.0

require github.com/google/go-cmp v0.7.0
