module github.com/atomiclimit/atomiclimit/cmd/httpdemo

go 1.24

require (
	github.com/atomiclimit/atomiclimit v0.1.0
	github.com/atomiclimit/atomiclimit/redislimit v0.1.0
	github.com/redis/go-redis/v9 v9.22.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/puzpuzpuz/xsync/v3 v3.5.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
)
