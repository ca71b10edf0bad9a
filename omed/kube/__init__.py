"""API client: config loading, the QPS/burst limiter, request metrics, typed errors.

Importing the package defers the CA loading of aiohttp's default TLS contexts to their first
use (:mod:`omed.kube.aiohttp_tls`), before any of its modules imports aiohttp.
"""

from omed.kube.aiohttp_tls import install

install()
