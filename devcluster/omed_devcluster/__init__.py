"""A local Kubernetes for tests, benchmarks and the demo: real etcd, kube-apiserver,
kube-controller-manager and kube-scheduler built from Go modules (:mod:`.binaries`,
:mod:`.controlplane`), a node simulator that plays the kubelet of simulated GPU nodes through
the API server (:mod:`.simulator`), the charts installed with helm (:mod:`.install`) and the
demo (:mod:`.demo`).

It is a distribution of its own (``omed-devcluster``, in ``devcluster/`` of the omed
checkout), installed beside omed by ``./dev``, so the product's wheel and image carry only
what runs in a cluster. It imports omed; omed never imports it. It reads the CRDs, charts and
examples from the checkout it sits in (``deploy/``, ``examples/``), so it is installed
editable from there.
"""
