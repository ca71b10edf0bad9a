"""A local Kubernetes for tests, benchmarks and the demo: real etcd and kube-apiserver built
from Go modules (:mod:`.binaries`, :mod:`.controlplane`), and a node simulator that plays
kubelet and scheduler through the API server (:mod:`.simulator`)."""
