#!/usr/bin/env bash
# A user's go get, proven offline from this tree: the root module and the
# nested modules are served by a file module proxy made from the checkout
# at a pretend version, and a consumer module outside the tree gets and
# builds each nested module with no workspace and no replace (GOWORK=off),
# as it would from a real tag. Other modules come from the proxy the
# environment names (go env GOPROXY).
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:-v0.1.0}
root=github.com/atomiclimit/atomiclimit
proxy=$(mktemp -d)
consumer=$(mktemp -d)
trap 'rm -rf "$proxy" "$consumer"' EXIT

# The directories of every module of the tree, the root as ".".
mapfile -t moddirs < <(git ls-files 'go.mod' '*/go.mod' | xargs -n1 dirname | sort)

# serve puts the module in dir (module path mod) into the proxy at
# $version: its tracked files, without the trees of the modules nested in
# it, as the go command zips a module.
serve() {
	local mod=$1 dir=$2 stage
	stage=$(mktemp -d)
	local dest="$stage/$mod@$version"
	mkdir -p "$dest"
	local prefix=""
	[ "$dir" != "." ] && prefix="$dir/"
	git ls-files -- "${prefix:-.}" | while read -r f; do
		rel=${f#"$prefix"}
		for m in "${moddirs[@]}"; do
			# skip files of another module nested under this one
			if [ "$m" != "$dir" ] && [ "$m" != "." ] && { [ "$dir" = "." ] || [[ $m == "$prefix"* ]]; } && [[ $f == "$m/"* ]]; then
				continue 2
			fi
		done
		mkdir -p "$dest/$(dirname "$rel")"
		cp "$f" "$dest/$rel"
	done
	local at="$proxy/$mod/@v"
	mkdir -p "$at"
	cp "$dest/go.mod" "$at/$version.mod"
	printf '{"Version":"%s","Time":"%s"}\n' "$version" "$(git log -1 --format=%cI)" > "$at/$version.info"
	echo "$version" >> "$at/list"
	(cd "$stage" && zip -qr "$at/$version.zip" "$mod@$version")
	rm -rf "$stage"
	echo "served $mod@$version ($(unzip -l "$at/$version.zip" | tail -1 | awk '{print $2}') files)"
}

serve "$root" .
serve "$root/redislimit" redislimit
serve "$root/grpclimit" grpclimit

export GOWORK=off GOFLAGS=-mod=mod GONOSUMDB=$root GONOSUMCHECK=1
GOPROXY="file://$proxy,$(go env GOPROXY)"
export GOPROXY

# One consumer per nested module, so that each is proven on its own.
for nested in redislimit grpclimit; do
	dir="$consumer/$nested"
	mkdir -p "$dir"
	cd "$dir"
	go mod init example.com/consumer >/dev/null 2>&1
	case $nested in
	redislimit)
		cat > main.go <<'GO'
package main

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/httplimit"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

func main() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 10 * time.Millisecond})
	fleet, err := redislimit.NewRule(client, atomiclimit.GCRA(atomiclimit.PerSecond(10), 20))
	if err != nil {
		panic(err)
	}
	var _ atomiclimit.KeyedLimiter[string] = fleet
	_, err = httplimit.New(httplimit.Config[netip.Prefix]{Key: httplimit.RemoteIP, Policies: []httplimit.Policy[netip.Prefix]{
		{Name: "ip", Limiter: mustKeyed()},
	}})
	fmt.Println("redislimit:", fleet.Quota("k").String, err)
}

func mustKeyed() *atomiclimit.Keyed[netip.Prefix] {
	k, err := atomiclimit.NewKeyed[netip.Prefix](atomiclimit.PerSecond(10), 20)
	if err != nil {
		panic(err)
	}
	return k
}
GO
		;;
	grpclimit)
		cat > main.go <<'GO'
package main

import (
	"fmt"

	"google.golang.org/grpc"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/grpclimit"
)

func main() {
	k, err := atomiclimit.NewKeyed[string](atomiclimit.PerSecond(10), 20)
	if err != nil {
		panic(err)
	}
	ic, err := grpclimit.New(grpclimit.Config[string]{Key: grpclimit.FullMethod, Policies: []grpclimit.Policy[string]{{Name: "rpc", Limiter: k}}})
	if err != nil {
		panic(err)
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(ic.Unary()))
	defer s.Stop()
	fmt.Println("grpclimit: ok")
}
GO
		;;
	esac
	echo "-- go get $root/$nested@$version (GOWORK=off, no replace)"
	go get "$root/$nested@$version"
	go mod tidy
	go build -o /dev/null .
	go vet .
	grep -E "atomiclimit" go.mod
	go run .
done
echo "consumers built against $version from the local module proxy"
