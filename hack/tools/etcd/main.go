// Command etcd is a thin wrapper around go.etcd.io/etcd/server/v3/etcdmain.
//
// `go install go.etcd.io/etcd/server/v3@v3.6.x` is refused because etcd's
// server/go.mod carries replace directives; requiring the server module from
// this module and calling etcdmain.Main is exactly what etcd's own
// server/main.go does.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
