module github.com/atomiclimit/atomiclimit/grpclimit

go 1.24.0

require (
	github.com/atomiclimit/atomiclimit v0.1.0
	github.com/atomiclimit/atomiclimit/redislimit v0.1.0
	github.com/redis/go-redis/v9 v9.22.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260120221211-b8f7ae30c516
	google.golang.org/grpc v1.80.0
	google.golang.org/protobuf v1.36.11
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/puzpuzpuz/xsync/v3 v3.5.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/net v0.49.0 // indirect
	golang.org/x/sys v0.40.0 // indirect
	golang.org/x/text v0.33.0 // indirect
)
