module github.com/atomiclimit/atomiclimit/bench

go 1.26.0

require (
	github.com/atomiclimit/atomiclimit v0.1.0
	github.com/atomiclimit/atomiclimit/grpclimit v0.1.0
	github.com/didip/tollbooth/v7 v7.0.2
	github.com/go-chi/httprate v0.16.1
	github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.4
	github.com/juju/ratelimit v1.0.2
	github.com/puzpuzpuz/xsync/v3 v3.5.1
	github.com/sethvargo/go-limiter v0.7.1
	github.com/throttled/throttled/v2 v2.15.0
	github.com/ulule/limiter/v3 v3.11.2
	go.uber.org/ratelimit v0.3.1
	golang.org/x/perf v0.0.0-20260908200009-22c9c6c9d4da
	golang.org/x/time v0.16.0
	gonum.org/v1/plot v0.10.1
	google.golang.org/grpc v1.80.0
)

require (
	git.sr.ht/~sbinet/gg v0.3.1 // indirect
	github.com/aclements/go-moremath v0.0.0-20210112150236-f10218a38794 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/benbjohnson/clock v1.3.0 // indirect
	github.com/go-fonts/liberation v0.2.0 // indirect
	github.com/go-latex/latex v0.0.0-20210823091927-c0d11ff05a81 // indirect
	github.com/go-pdf/fpdf v0.6.0 // indirect
	github.com/go-pkgz/expirable-cache/v3 v3.0.0 // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/hashicorp/golang-lru v0.5.4 // indirect
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/zeebo/xxh3 v1.0.2 // indirect
	golang.org/x/image v0.46.0 // indirect
	golang.org/x/net v0.59.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260120221211-b8f7ae30c516 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)

tool golang.org/x/perf/cmd/benchstat

