"""The node simulator's parts: pure cores (durations, label selectors, the kubelet's per-pod
state machine and the status it writes, failure plans, node objects) and the small I/O
helpers (list+watch, timed wake-ups, the kubelets' loop, their events) that
:mod:`omed_devcluster.simulator` composes. They play the kubelet only; kube-scheduler and
kube-controller-manager are the real ones.

The pure modules take plain pod and node dicts and explicit times, so they are unit-tested
without an API server. Nothing here imports :mod:`omed.informers`: the simulator stands in
for the cluster the product runs against, so it must not share the product's caching code (a
bug there would hide itself).
"""
