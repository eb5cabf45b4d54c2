module github.com/atomiclimit/atomiclimit/redislimit

go 1.24

require (
	github.com/atomiclimit/atomiclimit v0.1.0
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/puzpuzpuz/xsync/v3 v3.5.1
	github.com/redis/go-redis/v9 v9.22.0
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.30.0 // indirect
)
