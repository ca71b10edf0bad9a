"""omed.kube.aiohttp_tls: aiohttp's default TLS contexts load their CA certificates when a
connection first takes one, and then hold what ``ssl.create_default_context()`` holds."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import asyncio, json, ssl
import omed.kube
omed.kube.defer_client_imports()
import omed.kube.client
import aiohttp.connector as connector

class Request:  # what _get_ssl_context reads of a request to an https URL
    def __init__(self, verify):
        self.ssl = verify
    def is_ssl(self):
        return True

def stats(context):
    return context.cert_store_stats()["x509_ca"]

async def main():
    before = [stats(connector._SSL_CONTEXT_VERIFIED), stats(connector._SSL_CONTEXT_UNVERIFIED)]
    verified = connector.TCPConnector()
    unverified = connector.TCPConnector(ssl=False)
    handed = [verified._get_ssl_context(Request(True)),
              unverified._get_ssl_context(Request(True))]
    await verified.close()
    await unverified.close()
    print(json.dumps({
        "before": before,
        "after": [stats(c) for c in handed],
        "defaults": [handed[0] is connector._SSL_CONTEXT_VERIFIED,
                     handed[1] is connector._SSL_CONTEXT_UNVERIFIED],
        "unverified_mode": handed[1].verify_mode == ssl.CERT_NONE,
        "system": stats(ssl.create_default_context()),
        "methods_restored": "set_default_verify_paths" not in vars(ssl.SSLContext),
    }))

asyncio.run(main())
"""


def test_the_default_contexts_load_their_cas_when_first_handed_to_a_connection() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True
    )
    result = json.loads(done.stdout)

    assert result["system"] > 0  # the machine has CA certificates to load
    assert result["before"] == [0, 0]
    assert result["after"] == [result["system"], result["system"]]
    assert result["defaults"] == [True, True]
    assert result["unverified_mode"] is True
    assert result["methods_restored"] is True


def test_a_connector_imported_first_is_left_as_it_is() -> None:
    script = (
        "import aiohttp.connector as c, json\n"
        "import omed.kube\n"
        "omed.kube.defer_client_imports()\n"
        "import omed.kube.client\n"
        "print(json.dumps(c._SSL_CONTEXT_VERIFIED.cert_store_stats()['x509_ca'] > 0))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) is True


def test_the_manager_keeps_the_ordinary_imports() -> None:
    """The manager never calls defer_client_imports: aiohttp's contexts hold their CAs from
    the import on, no import hook stays behind, and prometheus_client is the ordinary
    package (its ``__init__`` run)."""
    script = (
        "import json, sys\n"
        "import omed.manager.startup, omed.kube.client\n"
        "import aiohttp.connector as c, prometheus_client\n"
        "print(json.dumps({\n"
        "  'cas': c._SSL_CONTEXT_VERIFIED.cert_store_stats()['x509_ca'] > 0,\n"
        "  'hooks': [type(f).__module__ for f in sys.meta_path\n"
        "            if type(f).__module__.startswith('omed')],\n"
        "  'init_ran': '__getattr__' not in vars(prometheus_client)\n"
        "    and hasattr(prometheus_client, 'generate_latest'),\n"
        "}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == {"cas": True, "hooks": [], "init_ran": True}
