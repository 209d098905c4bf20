// Command etcd is the etcd server at the version k8s.io/kubernetes pins, so
// the local apiserver gets the storage it was released against (Debian's
// etcd 3.4 is too old for its watch features).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
