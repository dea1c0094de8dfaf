"""The client run in-process, as the client tests run it: ``run("why", "nlp/x")`` gives its
exit status, standard output and standard error."""

from __future__ import annotations

import io

from gpupool.client.main import main

NOWHERE = "http://127.0.0.1:9"  # the discard port: nothing listens there


def run(*argv: str) -> tuple[int, str, str]:
    """The client's exit status, standard output and standard error."""
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()
