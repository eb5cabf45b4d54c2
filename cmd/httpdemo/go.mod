module github.com/atomiclimit/atomiclimit/cmd/httpdemo

go 1.24

replace github.com/atomiclimit/atomiclimit => ../..

require github.com/atomiclimit/atomiclimit v0.0.0-00010101000000-000000000000

require github.com/puzpuzpuz/xsync/v3 v3.5.1 // indirect
