module adiskq.invalid/benchmarks/godiskq

go 1.21.3

require (
	github.com/wcharczuk/go-diskq v0.0.0-00010101000000-000000000000
	golang.org/x/sys v0.4.0
)

require github.com/fsnotify/fsnotify v1.7.0 // indirect
