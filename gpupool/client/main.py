"""``gpupool``: submit work, see where it stands and why, try it first, cancel it.

    gpupool login [--url URL] [--username NAME]
    gpupool status [--all] [--state S] [--queue Q] [--namespace N]
    gpupool nodes [--flavor F] [--state S] [--unhealthy]
    gpupool nodes drain NAME [--reason TEXT]        (admins)
    gpupool nodes end-drain NAME [--reason TEXT]    (admins)
    gpupool submit [FILE|-] [--name ... flags] [-- COMMAND ARGS...]
    gpupool dry-run [FILE|-] [--name ... flags] [-- COMMAND ARGS...]
    gpupool why NAMESPACE/NAME
    gpupool cancel NAMESPACE/NAME [--reason TEXT]
    gpupool requests [--state S] [--kind K] [--tenant T]
    gpupool request quota --queue Q --flavor F --guarantee N --deserved N --capability N
        --justification TEXT [--draft]                              (leads)
    gpupool request budget --tenant T --priority-class C --period-start DAY --period-end DAY
        --gpu-hours N --justification TEXT [--draft]                (leads)
    gpupool request submit REQUEST                  (your draft: to the admins)
    gpupool request withdraw REQUEST                (your draft, deleted; or your submitted
                                                     request before its decision, kept)
    gpupool approve REQUEST [--reason TEXT]                         (admins)
    gpupool reject REQUEST --reason TEXT                            (admins)

The server and token come from ``GPUPOOL_URL`` / ``GPUPOOL_TOKEN``, else from what ``gpupool
login`` stored. Exit status: 0 done, 1 the server refused (the message names the field),
2 a usage error, 3 a dry-run that would not start now, 141 the reader of the output went
away (``gpupool status | head -1``: the status a shell gives a tool SIGPIPE stopped).
With ``--json`` an error is one line of JSON on standard error, the API's error object
(``{"error": {"status", "code", "message", "fields"}}``), the exit status unchanged. A list
(``status``, ``nodes``, ``requests``) is read page after page up to ``http.MAX_ROWS``
(10,000) rows; past it a warning on standard error says how many of how many it shows and
which filters narrow it (as ``{"warning": {...}}`` with ``--json``), and the exit status
stays 0.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import sys
import urllib.parse
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, NoReturn, TextIO

import yaml

from gpupool.client.config import (
    ConfigError,
    Settings,
    config_path,
    load,
    save,
    server_url_problem,
)
from gpupool.client.http import Api, ApiError, Listing, field_lines
from gpupool.number_formats import GPU_HOURS_PLACES, plain_number
from gpupool.quotas.levels import levels_out_of_order
from gpupool.text_limits import too_long

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_WOULD_WAIT = 0, 1, 2, 3
EXIT_BROKEN_PIPE = 128 + 13  # as a shell reports a tool stopped by SIGPIPE
# ``status``' REASON of pending work no cycle has explained yet: My workloads' words for it.
NOT_LOOKED_AT = "not looked at by a cycle yet"
LIVE_STATES = ("pending", "admitted", "running")
# The words of the API's ``state`` filters (``WorkloadState``, ``NodeState``; the client has no
# Django: tests/client/test_client_bad_input.py checks them against the server's): a word
# outside them is a usage error here, not a round trip to a 400.
WORKLOAD_STATES = (*LIVE_STATES, "succeeded", "failed", "preempted", "cancelled")
NODE_STATES = ("ready", "cordoned", "draining", "drained", "excluded", "gone")
# Quota and budget requests as the requests API words and bounds them (``QuotaRequestState``,
# ``QuotaRequestKind``, ``quotas.models.PAYLOAD_LIMITS``, ``JUSTIFICATION_MAX_LENGTH``;
# tests/client/test_client_requests.py checks them against the server's): input outside them
# is a usage error naming the flag, not a round trip to a 400.
REQUEST_STATES = ("draft", "submitted", "approved", "rejected", "applied", "withdrawn")
# The kinds are the API's words everywhere the client names one (``--kind``, the KIND column,
# ``--json``); ``request quota`` is only the command that files a queue-quota request.
REQUEST_KINDS = ("queue-quota", "budget")
MAX_REQUEST_GPUS = Decimal("9999999.999")
MAX_REQUEST_GPU_HOURS = Decimal("99999999.999")
REQUEST_AMOUNT_PLACES = 3
JUSTIFICATION_MAX_LENGTH = 4000
DECISION_NOTE_MAX_LENGTH = 10_000
# A workload file: at most this many bytes, arrays and mappings at most this deep, and no
# YAML aliases (``*name``: a self-referring one, ``a: &a [*a]``, or a "billion laughs" bomb).
MAX_FILE_BYTES = 1024 * 1024
MAX_FILE_DEPTH = 32
DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
# The flags that take a duration (``seconds``): a value after them that starts with "-" and a
# digit (``--expected-runtime -2h``) is read as the flag's value, so the duration's own check
# says what is wrong with it, not argparse's "expected one argument".
DURATION_FLAGS = ("--protected-runtime", "--expected-runtime")
# A workload's expected runtime, as the workloads API bounds it
# (``workloads.actions.MAX_EXPECTED_RUNTIME_S``; tests/client/test_client_durations.py checks
# it against the server's): 366 days.
MAX_EXPECTED_RUNTIME_S = 366 * 24 * 3600


class UsageError(Exception):
    """The command line or the workload file is wrong; the message says how."""


class Parser(argparse.ArgumentParser):
    """argparse's parser; with ``json_errors`` a command-line error is raised as a
    ``UsageError`` (printed as JSON by ``run``) instead of printed as text."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if self.json_errors:
            raise UsageError(f"{self.prog}: {message}")
        super().error(message)


def seconds(text: str) -> int:
    """A duration: seconds (``5400``) or hours, minutes and seconds (``1h30m``)."""
    if text.isdigit():
        return int(text)
    if text.strip().startswith("-"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is negative: a duration is 0 or more, like 5400, 90m or 1h30m"
        )
    found = DURATION.match(text.strip())
    if not text.strip() or found is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 5400, 90m or 1h30m")
    hours, minutes, secs = (int(part or 0) for part in found.groups())
    return hours * 3600 + minutes * 60 + secs


def expected_runtime(text: str) -> int:
    """``--expected-runtime``: a duration (``seconds``) of at most ``MAX_EXPECTED_RUNTIME_S``."""
    value = seconds(text)
    if value > MAX_EXPECTED_RUNTIME_S:
        raise argparse.ArgumentTypeError(
            f"{text!r} is longer than {MAX_EXPECTED_RUNTIME_S // 3600}h (366 days), the longest "
            "expected runtime"
        )
    return value


def duration_values_joined(arguments: list[str]) -> list[str]:
    """``arguments`` with each duration flag (``DURATION_FLAGS``) followed by a value that
    starts with "-" and a digit written as one ``--flag=value``: argparse takes such a value
    for a flag, and would say only "expected one argument"."""
    joined: list[str] = []
    index = 0
    while index < len(arguments):
        word = arguments[index]
        after = arguments[index + 1] if index + 1 < len(arguments) else ""
        if word in DURATION_FLAGS and re.match(r"-[\d.]", after):
            joined.append(f"{word}={after}")
            index += 2
        else:
            joined.append(word)
            index += 1
    return joined


def variable(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` for ``--env``."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value


def server_url(text: str) -> str:
    """``--url``: an http or https address with a host."""
    problem = server_url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text.strip()


def request_amount(largest: Decimal) -> Any:
    """An amount a request may ask for (``--guarantee``, ``--gpu-hours``): a number of at
    least 0, at most ``largest``, with at most ``REQUEST_AMOUNT_PLACES`` decimal places, as the
    requests API takes it; kept as the decimal text the API is sent."""

    def parse(text: str) -> str:
        try:
            amount = Decimal(text.strip())
        except InvalidOperation:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not amount.is_finite() or amount < 0:
            raise argparse.ArgumentTypeError(f"must be a number of at least 0, not {text!r}")
        if amount > largest:
            raise argparse.ArgumentTypeError(f"must be at most {largest}, not {text!r}")
        if amount != amount.quantize(Decimal(1).scaleb(-REQUEST_AMOUNT_PLACES)):
            raise argparse.ArgumentTypeError(
                f"has at most {REQUEST_AMOUNT_PLACES} decimal places, not {text!r}"
            )
        return f"{(amount + 0).normalize():f}"  # 8, 0.5, 10 (not 1E+1), 0 (not -0)

    return parse


def day(text: str) -> date:
    """A day as ``2026-12-01`` (``--period-start``, ``--period-end``)."""
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a day like 2026-12-01") from None


def request_number(text: str) -> int:
    """A request's number, as the pages write it (``12`` or ``#12``)."""
    digits = text.strip().removeprefix("#")
    if not digits.isdigit() or int(digits) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a request number like 12")
    return int(digits)


def qualified(text: str) -> tuple[str, str]:
    """``NAMESPACE/NAME``."""
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAMESPACE/NAME")
    return namespace, name


# ----------------------------------------------------------------------------- rendering


def when(value: str | None) -> str:
    """An API time as ``2026-12-01 18:20 UTC`` (its own zone kept)."""
    if not value:
        return "unknown"
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    zone = moment.tzname() or ""
    return f"{moment:%Y-%m-%d %H:%M} {'UTC' if zone in {'UTC', 'UTC+00:00'} else zone}".strip()


def gpus(value: Any) -> str:
    """``4.000`` as ``4``, ``0.470`` as ``0.47``."""
    text = str(value)
    return text.rstrip("0").rstrip(".") if "." in text else text


def counted(number: Any, noun: str, plural: str | None = None) -> str:
    """A number and its noun, singular for exactly one: ``1 GPU``, ``4 GPUs``, ``0.5 GPUs``,
    ``1 GPU-hour``, ``2 times`` (the number written as ``gpus`` writes it)."""
    text = gpus(number)
    return f"{text} {noun if text == '1' else plural or noun + 's'}"


def asked(workload: dict[str, Any]) -> str:
    """What a workload asks in its unit's words (the API's ``unit``): ``4 GPUs``, or ``2 MIG
    instances`` for work of MIG flavors (a server without ``unit`` counts GPUs)."""
    return counted(workload["gpus"], workload.get("unit") or "GPU")


def unit_hour(event: dict[str, Any]) -> str:
    """The hour of what a preemption freed (its ``unit``): ``GPU-hour``, or ``MIG
    instance-hour`` for a victim stopped on a MIG flavor's nodes (its ``lost_gpu_hours``
    counts MIG instance-hours, as the page says)."""
    return f"{event.get('unit') or 'GPU'}-hour"


def hours_counted(amount: Any, noun: str) -> str:
    """GPU-hours (or MIG instance-hours) to the hundredth, as the pages write them
    (``number_formats.GPU_HOURS_PLACES``): ``9.1 GPU-hours``, not the API's ``9.0967``."""
    return counted(plain_number(amount, GPU_HOURS_PLACES), noun)


def lost_in_units(total: Any, events: list[dict[str, Any]]) -> str:
    """The progress a workload's preemptions lost (the API's ``total``), in their unit's
    hours; GPU-hours and MIG instance-hours said apart, never added."""
    hours: dict[str, Decimal] = {}
    for event in events:
        noun = unit_hour(event)
        hours[noun] = hours.get(noun, Decimal(0)) + Decimal(str(event["lost_gpu_hours"]))
    if len(hours) <= 1:
        return hours_counted(total, next(iter(hours), "GPU-hour"))
    return " and ".join(hours_counted(amount, noun) for noun, amount in sorted(hours.items()))


def table(rows: list[list[str]], out: TextIO) -> None:
    """Rows as aligned columns (the first row is the header), no spaces after the last."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        out.write("  ".join(cells).rstrip())
        out.write("\n")


def estimate(explanation: dict[str, Any]) -> str:
    """The estimated start in words, with what it rests on; one that has already passed
    (``estimate_passed``: before the pool's clock, which the client does not know) is due."""
    passed = explanation.get("estimate_passed")
    if not explanation.get("estimated_start_at"):
        facts = explanation.get("facts") or {}
        missing = facts.get("missing_pods")
        if (
            explanation.get("reason") == "gang"
            and isinstance(missing, int)
            and missing > 0
            and not facts.get("pods_being_created")  # gpupool's own: made at once
        ):
            # The cluster has not made all its pods: no time to promise (control.estimates).
            return f"none: it waits for its pods ({missing} not created yet)"
        if explanation.get("estimate_not_before"):
            looked = when(explanation["estimate_not_before"])
            if passed:
                return f"none yet (the last estimate looked ahead to {looked}, which has passed)"
            return f"not before {looked} (looked no further)"
        return "unknown (what it waits for has no expected end)"
    basis = explanation.get("estimate_learned")
    suffix = (
        " (from runtimes learned from similar work)"
        if basis
        else " (from declared runtimes)"
        if basis is False
        else ""
    )
    if passed:
        return f"due now (estimated for {when(explanation['estimated_start_at'])}{suffix})"
    return when(explanation["estimated_start_at"]) + suffix


# The facts that are moments (the workload page's ``dashboard.facts`` kind TIME; the client
# has no Django: tests/client/test_client_walk_s23_says_it_as_the_pages.py checks the two agree),
# written by the loop as POSIX seconds or ISO 8601: ``gpupool why`` says them as ``when``
# does, not as ``until=1796741536.034``.
TIME_FACTS = ("estimate_not_before", "reclaimable_at", "starving_since", "until")


def fact_value(value: Any, key: str = "") -> str:
    """A fact's value as ``gpupool why`` writes it: ``yes``/``no``, numbers as ``gpus``
    writes them (``112``, not ``112.0``), lists joined, objects as ``key=value`` pairs, a
    moment (``TIME_FACTS``) as ``2026-12-08 14:52 UTC``."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key in TIME_FACTS and isinstance(value, int | float | str) and value != "":
        return fact_moment(value)
    if isinstance(value, int | float):
        return gpus(f"{value:.3f}") if isinstance(value, float) else str(value)
    if isinstance(value, list):
        return "[" + ", ".join(fact_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={fact_value(v, k)}" for k, v in value.items()) + "}"
    return "-" if value is None else str(value)


def fact_moment(value: float | str) -> str:
    """A moment fact (POSIX seconds, or ISO 8601 text, UTC when it names no zone) as ``when``
    writes it; text that is no time as it is."""
    if isinstance(value, int | float):
        return when(datetime.fromtimestamp(value, UTC).isoformat())
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    return when((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).isoformat())


def estimated_cell(estimated: str | None, clock: str | None, not_before: str | None = None) -> str:
    """A list's estimated start: its time, ``due now`` once it is before the pool's
    ``clock`` (the last cycle's cluster time); without one, ``not before <time>`` where the
    estimates stopped looking ahead (``estimate_not_before``, as ``gpupool why`` says it),
    ``none yet`` once that has passed; ``-`` when there is neither."""
    if not estimated:
        if not not_before:
            return "-"
        if clock is not None and _moment(not_before) < _moment(clock):
            return f"none yet (looked ahead to {when(not_before)})"
        return f"not before {when(not_before)}"
    if clock is not None and _moment(estimated) < _moment(clock):
        return f"due now ({when(estimated)})"
    return when(estimated)


def _moment(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def drain_words(drains: list[dict[str, Any]]) -> str:
    """The drains that evicted a workload (a preemption's ``drains``) in the words of its
    page and summary (the server's ``workloads.queries.eviction_drain_words``): "for the
    drain of node n1, drained by ada: swap PSU"; "" for none."""
    said = [
        f"node {drain['node']}, drained by {drain['drained_by']}"
        + (f": {drain['reason']}" if drain["reason"].strip() else " (no reason given)")
        for drain in drains
    ]
    if len(said) < 2:
        return "".join(f"for the drain of {one}" for one in said)
    return "for the drain of its nodes: " + "; ".join(said)  # the API's are its own nodes'


def print_story(workload: dict[str, Any], out: TextIO) -> None:
    """``gpupool why``: state, the reason in plain words, position, estimate, preemptions
    (under one a drain caused: which node, who drained it and why, ``drain_words``), and an
    eviction a disruption budget refused while it is current."""
    name = f"{workload['namespace']}/{workload['name']}"
    out.write(
        f"{name}: {workload['state']} in queue {workload['queue']} (tenant "
        f"{workload['tenant']}), {asked(workload)}, class "
        f"{workload['priority_class']}\n"
    )
    explanation = workload["explanation"]
    if explanation.get("never_fits"):  # set aside: no position, no estimate (its summary)
        out.write(f"Why: {explanation['summary']}\n")
        out.write(f"     (reason: {explanation['reason']}, never fits)\n")
    elif workload["state"] == "pending":
        if explanation["reason"]:
            facts = ", ".join(
                f"{key}={fact_value(value, key)}" for key, value in explanation["facts"].items()
            )
            out.write(f"Why: {explanation['detail']}\n")
            out.write(f"     (reason: {explanation['reason']}{'; ' + facts if facts else ''})\n")
        else:
            out.write("Why: the next scheduling cycle has not looked at it yet.\n")
        position = explanation.get("queue_position")
        if explanation.get("waits_for_pods"):  # no position until its pods exist
            missing = (explanation.get("facts") or {}).get("missing_pods")
            out.write(f"Position: none: it waits for its pods ({missing} not created yet)\n")
        elif position:
            out.write(f"Position: {position} in queue {workload['queue']}\n")
        else:
            out.write("Position: not ranked yet\n")
        if explanation["reason"]:
            out.write(f"Estimated start: {estimate(explanation)}\n")
        else:
            out.write("Estimated start: not estimated yet\n")
    else:
        out.write(f"{explanation['summary']}\n")
    print_checkpoint(workload, out)
    refusal = workload.get("eviction_refusal")
    if refusal:  # an eviction a disruption budget refused, while current (as its page says)
        out.write(f"Eviction refused at {when(refusal['at'])}: {refusal['detail']}\n")
    events = workload.get("preemptions", [])
    if events:
        out.write(
            f"Preempted {counted(len(events), 'time')}, "
            f"{lost_in_units(workload['lost_gpu_hours'], events)} of progress lost:\n"
        )
        for event in events:
            cause = event["reason"]
            if event.get("preemptor_queue"):
                who = event.get("preemptor") or "a workload"
                cause += (
                    f" by {who} of queue {event['preemptor_queue']} "
                    f"(class {event['preemptor_class']})"
                )
            if event.get("nodes"):  # where it was stopped (a node failure's: the failed node)
                cause += f" on {', '.join(event['nodes'])}"
            out.write(
                f"  {when(event['at'])}  {cause}; "
                f"{counted(event['gpus_freed'], event.get('unit') or 'GPU')} freed, "
                f"{hours_counted(event['lost_gpu_hours'], unit_hour(event))} lost\n"
            )
            if drain := drain_words(event.get("drains") or []):  # below, as the page has it
                out.write(f"  {' ' * len(when(event['at']))}  {drain}\n")
    out.write("History:\n")
    for step in workload["timeline"]:
        actor = f" by {step['actor']}" if step.get("actor") else ""
        move = f"{step['from_state']} -> " if step["from_state"] else ""
        out.write(f"  {when(step['at'])}  {move}{transition_words(step)}{actor}\n")


def transition_words(step: dict[str, Any]) -> str:
    """A move's new state and why, the state said once: ``admitted: quota and capacity allow
    it`` (the API's reason no longer repeats it); a reason that opens with the state's own
    word reads on from it (``cancelled by user``, not ``cancelled: cancelled by user``)."""
    state, reason = step["to_state"], step["reason"]
    if reason == state or reason.startswith((f"{state} ", f"{state}: ")):
        return str(reason)
    return f"{state}: {reason}"


def no_such(error: ApiError, what: str) -> ApiError:
    """A 404 of a call that named one thing, said naming it (the API's 404 says only "Not
    found."): ``Not found: no node nosuch.``, ``Not found: no workload nlp/x among those you
    may see.`` (another team's answers 404 too); any other error as it came. With ``--json`` the
    error object stays the API's, as the server sent it."""
    if error.status != 404:
        return error
    return ApiError(404, f"Not found: no {what}.", error.fields, error.body)


def named_call(api: Api, what: str, method: str, path: str, body: Any = None) -> Any:
    """``api.call`` of a path that names one thing (a workload, a node, a request): a 404 is
    the ``no_such`` error naming ``what``."""
    try:
        return api.call(method, path, body)
    except ApiError as error:
        raise no_such(error, what) from None


def workload_call(
    api: Api, workload: tuple[str, str], method: str, suffix: str = "", body: Any = None
) -> Any:
    """A call on ``workloads/<namespace>/<name>/<suffix>``; a 404 names the workload."""
    namespace, name = workload
    path = f"workloads/{_segment(namespace)}/{_segment(name)}/{suffix}"
    what = f"workload {namespace}/{name} among those you may see"
    return named_call(api, what, method, path, body)


def _segment(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def print_checkpoint(workload: dict[str, Any], out: TextIO) -> None:
    """The last checkpoint its pods reported (``gpupool.io/last-checkpoint``), when one did:
    a preemption loses only the progress since then."""
    if workload.get("last_checkpoint_at"):
        out.write(
            f"Last checkpoint: {when(workload['last_checkpoint_at'])} (a preemption loses only "
            "the progress since then)\n"
        )


# ----------------------------------------------------------------------------- workload body


WORKLOAD_SHAPE = "a YAML or JSON object with name, queue and pod_sets"


class WorkloadLoader(yaml.SafeLoader):
    """PyYAML's safe loader, bounded: an alias (``*name``) is refused, and so is nesting
    deeper than ``MAX_FILE_DEPTH`` (checked as the document is composed, before Python's
    stack could run out). No workload needs either; without the bounds a self-referring
    alias crashes the loader, a nested one ("billion laughs") takes it forever and a deep
    document exhausts its recursion."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        """The next node, once it is known to be no alias and not too deep."""
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None,
                None,
                f"found an alias (*{event.anchor}): write the value out instead",
                event.start_mark,
            )
        self.depth += 1
        try:
            if self.depth > MAX_FILE_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nests more than {MAX_FILE_DEPTH} levels deep",
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def read_workload_file(name: str) -> Any:
    """The value of a workload file (``-``: standard input), read by ``WorkloadLoader``; a
    file that cannot be read, is too large or is no bounded YAML is a ``UsageError``."""
    source = "standard input" if name == "-" else name
    try:
        if name == "-":
            text = sys.stdin.read(MAX_FILE_BYTES + 1)
        else:
            with Path(name).open(encoding="utf-8") as file:
                text = file.read(MAX_FILE_BYTES + 1)
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {source}: {error}") from None
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise UsageError(f"cannot read {source}: it is larger than {MAX_FILE_BYTES:,} bytes")
    try:
        return yaml.load(text, Loader=WorkloadLoader)  # noqa: S506 (a safe loader, bounded)
    except (yaml.YAMLError, RecursionError, ValueError) as error:
        raise UsageError(f"cannot read {source}: {error}") from None


def _kind(value: Any) -> str:
    """What a file holds instead of one workload, in words."""
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    return "something else"


def workload_body(options: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    """The submission: the file's (``-``: standard input's), with the flags on top; or one
    pod set from the flags."""
    body: dict[str, Any] = {}
    if options.file:
        source = "standard input" if options.file == "-" else options.file
        loaded = read_workload_file(options.file)
        if loaded is None:
            raise UsageError(f"{source} is empty: expected {WORKLOAD_SHAPE}")
        if not isinstance(loaded, dict):
            raise UsageError(
                f"{source} must hold one workload, {WORKLOAD_SHAPE}; it holds {_kind(loaded)}"
            )
        body = loaded
    top = {
        "name": options.name,
        "queue": options.queue,
        "namespace": options.namespace,
        "priority_class": options.priority_class,
        "protected_runtime_s": options.protected_runtime,
        "expected_runtime_s": options.expected_runtime,
        "topology": options.topology,
        "min_member": options.min_member,
    }
    body.update({key: value for key, value in top.items() if value is not None})
    pod_set = {
        "count": options.count,
        "gpus": options.gpus,
        "gpu_milli": options.gpu_milli,
        "flavor": options.flavor,
        "cpu": options.cpu,
        "memory_gb": options.memory_gb,
        "image": options.image,
        "env": dict(options.env) if options.env else None,
        "command": command or None,
    }
    given = {key: value for key, value in pod_set.items() if value is not None}
    if "pod_sets" not in body:
        body["pod_sets"] = [{"count": 1} | given]
    elif given:
        if len(body["pod_sets"]) != 1:
            raise UsageError("pod-set flags apply to a file with exactly one pod set")
        body["pod_sets"][0].update(given)
    return body


# The workloads API's fields that ``submit`` and ``dry-run`` set from flags (a pod set's under
# its index 0, the one the pod-set flags apply to), by field: a refusal names the flag too.
WORKLOAD_FLAGS = {
    "name": "--name",
    "queue": "--queue",
    "namespace": "--namespace",
    "priority_class": "--priority-class",
    "protected_runtime_s": "--protected-runtime",
    "expected_runtime_s": "--expected-runtime",
    "topology": "--topology",
    "min_member": "--min-member",
    **{
        f"pod_sets.0.{key}": f"--{key.replace('_', '-')}"
        for key in ("count", "gpus", "gpu_milli", "flavor", "cpu", "memory_gb", "image", "env")
    },
}


def post_workload(api: Api, path: str, options: argparse.Namespace) -> Any:
    """POST the submission of ``options`` (``workload_body``) to ``path``; a refusal names,
    beside the API's field, the flag that sets it where the flags are how it is given (no
    file, or the flag given): ``pod_sets.0.image (--image): This field is required.``. With
    ``--json`` the API's error object stays as it was sent."""
    try:
        return api.call("POST", path, workload_body(options, options.command))
    except ApiError as error:

        def label(field: str) -> str:
            flag = WORKLOAD_FLAGS.get(field)
            if flag is None:
                return field
            given = getattr(options, flag[2:].replace("-", "_")) is not None
            return f"{field} ({flag})" if given or not options.file else field

        raise in_flag_words(error, label) from None


def in_flag_words(error: ApiError, label: Callable[[str], str]) -> ApiError:
    """``error`` (a refusal of a body the flags made) with its fields' messages as lines,
    each field named by ``label`` (the flag that sets it, ``field_lines``); one naming no
    field stays as the API said it. ``--json`` prints the API's error object as sent."""
    if not error.fields:
        return error
    return ApiError(error.status, field_lines(error.fields, label), error.fields, error.body)


def add_workload_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of ``submit`` and ``dry-run``."""
    parser.add_argument(
        "file",
        nargs="?",
        help="a workload as YAML or JSON (the API's body); - reads it from standard input",
    )
    parser.add_argument("--name", help="a DNS label, unique in the namespace")
    parser.add_argument("--queue", help="a leaf queue of your tenant")
    parser.add_argument("--namespace", help="default: the queue's tenant's first")
    parser.add_argument("--priority-class", dest="priority_class")
    parser.add_argument("--protected-runtime", type=seconds, help="e.g. 30m")
    parser.add_argument(
        "--expected-runtime",
        type=expected_runtime,
        help=f"e.g. 4h; at most {MAX_EXPECTED_RUNTIME_S // 3600}h (366 days)",
    )
    parser.add_argument("--topology", choices=["domain", "preferred"])
    parser.add_argument("--min-member", type=int, dest="min_member")
    parser.add_argument("--image", help="the pods' container image (needed unless FILE names one)")
    parser.add_argument("--count", type=int, help="pods (default 1)")
    parser.add_argument("--gpus", type=int, help="GPUs per pod")
    parser.add_argument("--gpu-milli", type=int, dest="gpu_milli", help="shared flavors")
    parser.add_argument("--flavor")
    parser.add_argument("--cpu", help="CPU cores per pod")
    parser.add_argument("--memory-gb", dest="memory_gb", help="GB of memory per pod")
    parser.add_argument("--env", type=variable, action="append", metavar="NAME=VALUE")


# ----------------------------------------------------------------------------- commands


def do_login(api: Api, options: argparse.Namespace, out: TextIO) -> int:
    """Exchange a username and password for a token and store it (mode 0600)."""
    url = (options.url or api.settings.url).rstrip("/")
    try:
        username = options.username or input("Username: ").strip()
    except EOFError:
        raise UsageError("login: no username: give --username, or type it when asked") from None
    if not username:
        raise UsageError("login: no username: give --username, or type it when asked")
    password = getpass.getpass("Password: ")
    login = Api(Settings(url, ""))
    answer = login.call("POST", "tokens/", {"username": username, "password": password}, auth=False)
    path = save(Settings(url, answer["token"], answer["username"]))
    out.write(f"Logged in to {url} as {answer['username']}; the token is in {path}.\n")
    return EXIT_OK


def warn_if_capped(listing: Listing, noun: str, narrow: str, options: argparse.Namespace) -> None:
    """A list cut at ``http.MAX_ROWS``: say on standard error how many of how many are shown and
    which filters narrow it (with ``--json`` as a JSON object: the output stays a list)."""
    if not listing.capped:
        return
    message = (
        f"showing the first {len(listing.rows):,} of {listing.count:,} {noun}, the most the "
        f"client reads; narrow the list with {narrow}"
    )
    if options.json:
        warning = {
            "code": "truncated",
            "message": message,
            "shown": len(listing.rows),
            "count": listing.count,
        }
        options.err.write(json.dumps({"warning": warning}) + "\n")
    else:
        options.err.write(f"gpupool: {message}.\n")


def do_status(api: Api, options: argparse.Namespace, out: TextIO) -> int:
    """Your tenants' workloads, newest first as the My workloads page lists them: state,
    position, estimated start and reason. A list cut at ``http.MAX_ROWS`` keeps the newest."""
    query: dict[str, Any] = {"ordering": "-submitted_at"}
    if options.state:
        query["state"] = options.state
    elif not options.all:
        query["state"] = list(LIVE_STATES)
    for key in ("queue", "namespace"):
        if getattr(options, key):
            query[key] = getattr(options, key)
    listing = api.every("workloads/", query)
    workloads = listing.rows
    narrow = "--state, --queue or --namespace"
    if options.all and not options.state:
        narrow += ", or leave out --all"
    warn_if_capped(listing, "workloads", narrow, options)
    if options.json:
        out.write(json.dumps(workloads, indent=1) + "\n")
        return EXIT_OK
    try:
        cycle: dict[str, Any] | None = api.call("GET", "scheduling-cycles/latest/")
    except ApiError as error:
        if error.status != 404:
            raise
        cycle = None
    # The pool's clock (a simulated cluster's runs ahead of the wall clock): the cycle's
    # cluster time. An estimate before it is due, not still to come. A cycle that read no
    # cluster time (it recorded nothing) has only the wall clock's ``finished_at``: said so.
    pool_time = cycle.get("cluster_at") if cycle is not None else None
    clock = (pool_time or cycle["finished_at"]) if cycle is not None else None
    if not workloads:
        out.write("No workloads.\n")
    else:
        # ASKS: GPUs, or a MIG flavor's MIG instances, in words (the API's ``unit``), as the
        # workload page's "Asks".
        rows = [["WORKLOAD", "QUEUE", "STATE", "ASKS", "POSITION", "ESTIMATED START", "REASON"]]
        for w in workloads:
            pending = w["state"] == "pending"
            never = pending and bool(w.get("never_fits"))  # set aside, as `why` says
            rows.append(
                [
                    f"{w['namespace']}/{w['name']}",
                    w["queue"],
                    w["state"],
                    asked(w),
                    "none: it waits for its pods"
                    if pending and w.get("waits_for_pods")
                    else str(w["queue_position"] or "-")
                    if pending and not never
                    else "-",
                    estimated_cell(w["estimated_start_at"], clock, w.get("estimate_not_before"))
                    if pending and not never
                    else "-",
                    f"{w['pending_reason']}, never fits"
                    if never
                    else (w["pending_reason"] or NOT_LOOKED_AT)
                    if pending
                    else "-",
                ]
            )
        table(rows, out)
    if cycle is None:
        out.write("No scheduling cycle has finished yet.\n")
    else:
        duration = cycle["duration_s"]
        # Which clock, as the Overview labels a cycle's time.
        on = "the pool's clock" if pool_time else "wall clock: it read no cluster time"
        out.write(
            f"Last scheduling cycle: {when(clock)} ({on}), "
            f"{duration:.2f} s, {cycle['admitted']} admitted, {cycle['evicted']} evicted, "
            f"{cycle['pending']} pending.\n"
        )
    out.write("`gpupool why NAMESPACE/NAME` says why one waits.\n" if workloads else "")
    return EXIT_OK


def do_nodes(api: Api, options: argparse.Namespace, out: TextIO) -> int:
    """The pool's nodes: flavor, state in one word, healthy GPUs of all, and why not all."""
    query: dict[str, Any] = {"ordering": "name"}
    if options.flavor:
        query["flavor"] = options.flavor
    if options.state:
        query["state"] = options.state
    if options.unhealthy:
        query["unhealthy"] = "true"
    listing = api.every("nodes/", query)
    nodes = listing.rows
    warn_if_capped(listing, "nodes", "--flavor, --state or --unhealthy", options)
    if "cordoned" in (options.state or ()) and "excluded" not in options.state:
        # ``cordoned`` is gpupool's own cordon; one made in the cluster (kubectl cordon) is
        # the cluster's exclusion, ``excluded`` (``NodeState``): said where it is missed.
        said = (
            "nodes cordoned in the cluster (kubectl cordon), not by gpupool, are excluded: "
            "--state excluded lists them"
        )
        note = {"warning": {"code": "cluster-cordons-excluded", "message": said}}
        options.err.write(json.dumps(note) + "\n" if options.json else f"gpupool: {said}.\n")
    if options.json:
        out.write(json.dumps(nodes, indent=1) + "\n")
        return EXIT_OK
    if not nodes:
        out.write("No nodes.\n")
        return EXIT_OK
    rows = [["NODE", "FLAVOR", "STATE", "HEALTHY GPUS", "REASONS"]]
    for n in nodes:
        rows.append(
            [
                n["name"],
                n["flavor"],
                n["state"],
                _healthy_gpus(n),
                "; ".join([*n["health"], *_cordon_note(n)]) or "-",
            ]
        )
    table(rows, out)
    return EXIT_OK


def _cordon_note(node: dict[str, Any]) -> list[str]:
    """Why a cordoned node is cordoned, as the nodes API says it (``cordon.words``: who
    cordoned or drained it, when and why, or that the cluster cordoned it), its moment in UTC
    as ``when`` writes the API's; none for a node not cordoned."""
    cordon = node.get("cordon")
    return [cordon["words"]] if cordon and cordon.get("words") else []


def _healthy_gpus(node: dict[str, Any]) -> str:
    """Healthy GPUs of all; on a MIG node also its MIG instances, the unit its flavor's quotas
    and capacity count in: ``8/8 (16/16 MIG instances)``."""
    said = f"{node['healthy_gpus']}/{len(node['gpus'])}"
    instances = node.get("mig_instances")
    if instances is not None:
        said += f" ({node.get('healthy_mig_instances', 0)}/{instances} MIG instances)"
    return said


def do_drain(api: Api, options: argparse.Namespace, out: TextIO) -> int:
    """Drain a node (admins): cordoned, its workloads evicted by the control loop."""
    path = f"nodes/{_segment(options.node)}/drain/"
    node = named_call(api, f"node {options.node}", "POST", path, {"reason": options.reason or ""})
    if options.json:
        out.write(json.dumps(node, indent=1) + "\n")
        return EXIT_OK
    since = when(node["drain_requested_at"])
    if node["state"] == "drained":
        out.write(f"{node['name']} is drained (asked {since}): nothing is left on it.\n")
    else:
        # Draining already, with an eviction a disruption budget refused: its health says so.
        refused = [
            r for r in node.get("health") or [] if r.startswith("draining: ") and "refused" in r
        ]
        evicts = "the control loop evicts its workloads at its next cycles"
        said = refused[0].removeprefix("draining: ") if refused else evicts
        out.write(f"{node['name']} is {node['state']} (asked {since}): cordoned, and {said}.\n")
    return EXIT_OK


def do_end_drain(api: Api, options: argparse.Namespace, out: TextIO) -> int:
    """End a node's drain (admins): uncordoned, nothing more evicted from it. The node is read
    first, as the answer alone does not tell whether there was a drain to end (ending none
    changes nothing, and is said so)."""
    path = f"nodes/{_segment(options.node)}/"
    before = named_call(api, f"node {options.node}", "GET", path)
    node = named_call(
        api, f"node {options.node}", "POST", f"{path}end-drain/", {"reason": options.reason or ""}
    )
    if options.json:
        out.write(json.dumps(node, indent=1) + "\n")
        return EXIT_OK
    name, state = node["name"], node["state"]
    if before["drain_requested_at"] is None:
        kept = (
            " (its cordon stays: the Cluster page or the nodes API's uncordon lifts it)"
            if node["cordoned"]
            else ""
        )
        out.write(
            f"{name} was not draining: no drain to end, nothing changed; it is {state}{kept}.\n"
        )
    elif state == "ready":
        out.write(
            f"{name}'s drain is ended: uncordoned, back in service; nothing more is evicted.\n"
        )
    else:
        out.write(
            f"{name}'s drain is ended: uncordoned, nothing more is evicted; but "
            f"{_why_not_back(node)}.\n"
        )
    return EXIT_OK


EXCLUSION_PREFIX = "the cluster takes no pods here: "  # ``Node.health_reasons``' word


def _why_not_back(node: dict[str, Any]) -> str:
    """Why a node whose drain just ended takes no placements yet, and when that clears. The
    cluster's exclusion is as the control loop's last sync saw it: gpupool's own cordon in the
    cluster (pushed while the node drained) is lifted at the loop's next cycle."""
    why = next(
        (r[len(EXCLUSION_PREFIX) :] for r in node["health"] if r.startswith(EXCLUSION_PREFIX)), ""
    )
    if node["state"] != "excluded" or not why:
        return f"it is {node['state']}, so it takes no placements yet"
    if why == "cordoned":
        return (
            "the cluster still has it cordoned (state excluded), as the control loop's last "
            "sync saw it: the loop lifts the cordon gpupool put there at its next cycle, and "
            "the node is ready from the sync after (a cordon made in the cluster, as with "
            "kubectl cordon, stays until it is lifted there)"
        )
    return (
        f"it is excluded: the cluster takes no pods there ({why}), as the control loop's last "
        "sync saw it; it takes placements from the first sync after the cluster does again"
    )


def do_requests(api: Api, options: argparse.Namespace, out: TextIO) -> int:
    """The quota and budget requests you see (a lead: your teams'; admins and finance: every
    team's; a draft only its requester), newest first, with where each stands."""
    query: dict[str, Any] = {}
    for key in ("state", "kind", "tenant"):
        if getattr(options, key):
            query[key] = getattr(options, key)
    listing = api.every("quota-requests/", query)
    found = listing.rows
    warn_if_capped(listing, "requests", "--state, --kind or --tenant", options)
    if options.json:
        out.write(json.dumps(found, indent=1) + "\n")
        return EXIT_OK
    if not found:
        out.write("No requests.\n")
        return EXIT_OK
    rows = [["REQUEST", "KIND", "STATE", "TENANT", "BY", "SUBMITTED", "WHAT"]]
    for r in found:
        rows.append(
            [
                f"#{r['id']}",
                r["kind"],
                r["state"],
                r["tenant"],
                r["requested_by"],
                when(r["submitted_at"]) if r["submitted_at"] else "-",
                r["summary"],
            ]
        )
    table(rows, out)
    return EXIT_OK


def request_body(options: argparse.Namespace) -> dict[str, Any]:
    """The requests API's body for ``gpupool request quota|budget``, checked as the API checks
    it (amounts in order, a period that ends after it starts, a justification); a flag that
    breaks a rule is a ``UsageError`` naming it."""
    justification = options.justification
    if not justification.strip():
        raise UsageError("--justification: say why the change is needed")
    if len(justification) > JUSTIFICATION_MAX_LENGTH:
        raise UsageError(
            f"--justification: {too_long(JUSTIFICATION_MAX_LENGTH, len(justification))}"
        )
    body: dict[str, Any] = {"justification": justification, "submit": not options.draft}
    if options.request_kind == "quota":
        levels = {key: getattr(options, key) for key in ("guarantee", "deserved", "capability")}
        out_of_order = levels_out_of_order(levels, words=lambda key: f"--{key}")
        if out_of_order:
            raise UsageError("; ".join(found.message for found in out_of_order))
        return body | {
            "kind": "queue-quota",
            "queue": options.queue,
            "flavor": options.flavor,
            "payload": levels,
        }
    if options.period_end <= options.period_start:
        raise UsageError(
            f"--period-end ({options.period_end}) must be after --period-start "
            f"({options.period_start}): it is the first day after the period"
        )
    if Decimal(options.gpu_hours) == 0:
        raise UsageError("--gpu-hours: 0 GPU-hours would change nothing")
    return body | {
        "kind": "budget",
        "tenant": options.tenant,
        "priority_class": options.priority_class,
        "period_start": options.period_start.isoformat(),
        "period_end": options.period_end.isoformat(),
        "payload": {"gpu_hours": options.gpu_hours},
    }


# The requests API's fields by the ``request quota`` / ``request budget`` flag that sets each
# (a payload's amounts as the API names them, alone or under ``payload``): a refusal names
# the flag, as the client's own checks of those flags do.
REQUEST_FLAGS = {
    "tenant": "--tenant",
    "queue": "--queue",
    "flavor": "--flavor",
    "priority_class": "--priority-class",
    "period_start": "--period-start",
    "period_end": "--period-end",
    "justification": "--justification",
    **{
        name: f"--{key.replace('_', '-')}"
        for key in ("guarantee", "deserved", "capability", "gpu_hours")
        for name in (key, f"payload.{key}")
    },
}


def do_request(api: Api, options: argparse.Namespace, out: TextIO) -> int:
    """File a quota or budget request (leads), submitted to the admins unless ``--draft``; a
    refusal names the flags (``REQUEST_FLAGS``)."""
    try:
        made = api.call("POST", "quota-requests/", request_body(options))
    except ApiError as error:
        raise in_flag_words(error, lambda field: REQUEST_FLAGS.get(field, field)) from None
    if options.json:
        out.write(json.dumps(made, indent=1) + "\n")
        return EXIT_OK
    state = "a draft" if made["state"] == "draft" else made["state"]
    out.write(f"Request #{made['id']} is {state}: {made['summary']}.\n")
    if made.get("approval_refusal"):
        out.write(f"As things stand an admin could not approve this: {made['approval_refusal']}\n")
    if made["state"] == "draft":
        out.write(
            f"Only you see a draft: submit it with `gpupool request submit {made['id']}`, or "
            "on the Requests page.\n"
        )
    return EXIT_OK


def _request(options: argparse.Namespace) -> str:
    """A request named in a "no such" error (``no_such``)."""
    return f"request #{options.request} among those you may see"


def do_submit_request(api: Api, options: argparse.Namespace, out: TextIO) -> int:
    """Send one's draft to the admins (``POST .../submit/``, as the request's page does)."""
    submitted = named_call(
        api, _request(options), "POST", f"quota-requests/{options.request}/submit/"
    )
    if options.json:
        out.write(json.dumps(submitted, indent=1) + "\n")
        return EXIT_OK
    out.write(f"Request #{submitted['id']} is submitted to the admins: {submitted['summary']}.\n")
    if submitted.get("approval_refusal"):
        out.write(
            f"As things stand an admin could not approve this: {submitted['approval_refusal']}\n"
        )
    return EXIT_OK


def do_withdraw_request(api: Api, options: argparse.Namespace, out: TextIO) -> int:
    """Withdraw one's own request, as the request's page does: a draft is deleted (``DELETE
    .../<id>/``); a submitted one not yet decided is kept, withdrawn (``POST .../withdraw/``).
    With ``--json`` a deleted draft, of which the API answers nothing, is printed as it was
    last read, with ``"deleted": true``."""
    request = named_call(api, _request(options), "GET", f"quota-requests/{options.request}/")
    if request["state"] == "draft":
        named_call(api, _request(options), "DELETE", f"quota-requests/{options.request}/")
        if options.json:
            out.write(json.dumps(request | {"deleted": True}, indent=1) + "\n")
        else:
            out.write(f"Draft #{request['id']} is withdrawn: {request['summary']}.\n")
        return EXIT_OK
    withdrawn = named_call(
        api, _request(options), "POST", f"quota-requests/{options.request}/withdraw/"
    )
    if options.json:
        out.write(json.dumps(withdrawn, indent=1) + "\n")
        return EXIT_OK
    out.write(
        f"Request #{withdrawn['id']} is withdrawn: {withdrawn['summary']}. It stays listed as "
        "withdrawn; no admin will decide it, and you may file a new request for its target.\n"
    )
    return EXIT_OK


def do_decide(api: Api, options: argparse.Namespace, out: TextIO) -> int:
    """Approve (which applies its change) or reject a submitted request (admins; never one's
    own). A rejection says why."""
    reason = options.reason or ""
    if options.verb == "reject" and not reason.strip():
        raise UsageError("--reason: say why the request is rejected")
    if len(reason) > DECISION_NOTE_MAX_LENGTH:
        raise UsageError(f"--reason: {too_long(DECISION_NOTE_MAX_LENGTH, len(reason))}")
    decided = named_call(
        api,
        _request(options),
        "POST",
        f"quota-requests/{options.request}/{options.verb}/",
        {"decision_note": reason},
    )
    if options.json:
        out.write(json.dumps(decided, indent=1) + "\n")
        return EXIT_OK
    out.write(f"Request #{decided['id']} is {decided['state']}: {decided['summary']}.\n")
    return EXIT_OK


def never_runs(why: str) -> str:
    """The line ``dry-run`` prints for work that could never run as asked, and ``submit``
    prints as its warning: the server's reason (its ``never_fits``), some of which open with
    its own "It can never run as asked: "."""
    return f"It could never run as asked: {why.removeprefix('It can never run as asked: ')}"


def do_submit(api: Api, options: argparse.Namespace, out: TextIO) -> int:
    """Submit a workload; print where it stands, and warn, in dry-run's words, when it could
    never run as asked (it is submitted all the same: the API's ``warning``)."""
    made = post_workload(api, "workloads/", options)
    if options.json:
        out.write(json.dumps(made, indent=1) + "\n")
        return EXIT_OK
    out.write(
        f"Submitted {made['namespace']}/{made['name']} to queue {made['queue']} "
        f"({asked(made)}, class {made['priority_class']}).\n"
    )
    if made.get("warning"):
        out.write(
            f"Warning: {never_runs(made['warning'])} It waits, set aside, until a quota or the "
            "pool changes so that it could fit.\n"
        )
    out.write(f"{made['explanation']['summary']}\n")
    out.write(f"`gpupool why {made['namespace']}/{made['name']}` follows it.\n")
    return EXIT_OK


def do_dry_run(api: Api, options: argparse.Namespace, out: TextIO) -> int:
    """Would it start now? Quota, then capacity, then placement."""
    answer = post_workload(api, "workloads/dry-run/", options)
    if options.json:
        out.write(json.dumps(answer, indent=1) + "\n")
    else:
        basis = f"cycle {answer['cycle_id']}" if answer["cycle_id"] is not None else "no cycle yet"
        out.write(f"Dry-run on the pool as of {when(answer['snapshot_at'])} ({basis}):\n")
        for layer in answer["layers"]:
            verdict = "passes" if layer["passes"] else "FAILS "
            out.write(f"  {layer['layer']:<10} {verdict}  {layer['detail']}\n")
        if answer["fits"]:
            out.write("It would start now.\n")
        elif answer.get("never_fits"):
            out.write(f"{never_runs(str(answer['never_fits']))}\n")
        else:
            out.write(f"It would not start now: {answer['first_failure']}.\n")
    return EXIT_OK if answer["fits"] else EXIT_WOULD_WAIT


def do_why(api: Api, options: argparse.Namespace, out: TextIO) -> int:
    """Where one workload stands, why, and what happened to it."""
    try:
        workload = workload_call(api, options.workload, "GET")
    except ApiError as error:
        if error.status != 404:
            raise
        raise refused_or(api, options.workload, error) from None
    if options.json:
        out.write(json.dumps(workload, indent=1) + "\n")
    else:
        print_story(workload, out)
    return EXIT_OK


def refused_or(api: Api, workload: tuple[str, str], error: ApiError) -> ApiError:
    """Why no workload has this name, when pods of that name wait refused (a queue of
    another tenant, a malformed annotation: ``workloads/refused/``, what the My workloads
    page lists): "not a workload: ..." with the refusal (with ``--json``, the API's 404 as
    it was sent); else ``error`` as it is."""
    namespace, name = workload
    try:
        refused = api.call(
            "GET", "workloads/refused/", query={"namespace": namespace, "name": name}
        )
    except ApiError:
        return error  # (a server without the list: the "no workload" said already)
    rows = refused.get("results") or []
    if not rows:
        return error
    row = rows[0]
    pods = int(row["pods"])
    why = str(row["why"]).removeprefix("gpupool will not schedule these pods: ")
    message = (
        f"{namespace}/{name} is not a workload: the {counted(pods, 'pod')} waiting under that "
        f"name {'is' if pods == 1 else 'are'} refused: {why}"
    )
    return ApiError(404, message, None, error.body)


def do_cancel(api: Api, options: argparse.Namespace, out: TextIO) -> int:
    """Cancel a workload, running or not."""
    namespace, name = options.workload
    answer = workload_call(
        api, options.workload, "POST", "cancel/", {"reason": options.reason or ""}
    )
    out.write(f"Cancelled {namespace}/{name}.\n")
    # What becomes of its GPUs and pods (a Job's suspended, ...), as its page says it.
    outcome = answer.get("outcome") if isinstance(answer, dict) else None
    if outcome:
        out.write(f"{outcome[:1].upper()}{outcome[1:]}\n")
    return EXIT_OK


def add_request_commands(commands: Any) -> Any:
    """``requests``, ``request quota|budget|submit|withdraw``, ``approve`` and ``reject``:
    quota and budget requests, as the requests API (``/api/v1/quota-requests/``) and the
    Requests and Approvals pages have them; returns the subcommands of ``request``."""
    listed = commands.add_parser(
        "requests",
        help="quota and budget requests and where each stands (leads: your teams'; admins "
        "and finance: every team's)",
    )
    listed.add_argument(
        "--state",
        action="append",
        choices=REQUEST_STATES,
        metavar="STATE",
        help=f"{', '.join(REQUEST_STATES[:-1])} or {REQUEST_STATES[-1]} (repeat for several; "
        "default: all)",
    )
    listed.add_argument(
        "--kind",
        choices=REQUEST_KINDS,
        help="queue-quota or budget, as the API and the KIND column name them (`request "
        "quota` files a queue-quota request)",
    )
    listed.add_argument("--tenant", help="the tenant that asks")
    listed.set_defaults(run=do_requests)
    file = commands.add_parser(
        "request",
        help="leads: ask for a queue's quota or a team's priority budget (submitted to the "
        "admins unless --draft); submit or withdraw your own request",
    )
    kinds = file.add_subparsers(
        dest="request_kind", required=True, metavar="{quota,budget,submit,withdraw}"
    )
    quota = kinds.add_parser(
        "quota", help="new guarantee, deserved and capability of a queue's flavor (GPUs)"
    )
    quota.add_argument("--queue", required=True, help="a queue of a team you lead")
    quota.add_argument("--flavor", required=True)
    gpus_amount = request_amount(MAX_REQUEST_GPUS)
    for level, meaning in (
        ("guarantee", "reserved for the queue, never lent"),
        ("deserved", "its fair share, lent while idle"),
        ("capability", "its hard cap"),
    ):
        quota.add_argument(
            f"--{level}", required=True, type=gpus_amount, metavar="GPUS", help=meaning
        )
    budget = kinds.add_parser(
        "budget", help="GPU-hours added to a team's priority budget at a class for a period"
    )
    budget.add_argument("--tenant", required=True, help="a team you lead")
    budget.add_argument(
        "--priority-class",
        dest="priority_class",
        required=True,
        help="a class with a budget rate above 0",
    )
    budget.add_argument(
        "--period-start",
        dest="period_start",
        required=True,
        type=day,
        metavar="DAY",
        help="the period's first day, e.g. 2026-12-01",
    )
    budget.add_argument(
        "--period-end",
        dest="period_end",
        required=True,
        type=day,
        metavar="DAY",
        help="the first day after the period, e.g. 2027-01-01",
    )
    budget.add_argument(
        "--gpu-hours",
        dest="gpu_hours",
        required=True,
        type=request_amount(MAX_REQUEST_GPU_HOURS),
        metavar="GPU_HOURS",
        help="added to the period's grant",
    )
    for each in (quota, budget):
        each.add_argument(
            "--justification",
            required=True,
            metavar="TEXT",
            help="why the change is needed (the admins read it)",
        )
        each.add_argument("--draft", action="store_true", help="keep it a draft, seen by you only")
        each.set_defaults(run=do_request)
    submit = kinds.add_parser("submit", help="send your draft to the admins")
    submit.set_defaults(run=do_submit_request)
    withdraw = kinds.add_parser(
        "withdraw",
        help="withdraw your request before an admin decides it: a draft is deleted, a "
        "submitted request is kept, withdrawn",
    )
    withdraw.set_defaults(run=do_withdraw_request)
    for each in (submit, withdraw):
        each.add_argument("request", type=request_number, metavar="REQUEST", help="e.g. 12")
    approve = commands.add_parser(
        "approve", help="admins: approve a submitted request, which applies its change"
    )
    reject = commands.add_parser("reject", help="admins: reject a submitted request, saying why")
    for each, required in ((approve, False), (reject, True)):
        each.add_argument("request", type=request_number, metavar="REQUEST", help="e.g. 12")
        each.add_argument(
            "--reason",
            required=required,
            metavar="TEXT",
            help="the decision's comment (the API's decision_note), sent to the requester"
            + ("" if not required else "; required"),
        )
        each.set_defaults(run=do_decide)
    return kinds


def parser(json_errors: bool = False) -> argparse.ArgumentParser:
    """The command line; ``json_errors``: its errors raised as ``UsageError`` (``--json``)."""
    top = Parser(
        prog="gpupool",
        description="Submit GPU work to a gpupool pool, see where it stands and why.",
        epilog=f"Server and token: GPUPOOL_URL, GPUPOOL_TOKEN, else {config_path()} "
        "(written by `gpupool login`).",
    )
    top.add_argument("--json", action="store_true", help="print the API's JSON")
    commands = top.add_subparsers(dest="verb", required=True, metavar="COMMAND")
    login = commands.add_parser("login", help="store an API token for a username and password")
    login.add_argument(
        "--url", type=server_url, help="the server, e.g. https://gpupool.example.org"
    )
    login.add_argument("--username")
    login.set_defaults(run=do_login)
    status = commands.add_parser(
        "status", help="your tenants' waiting and running workloads, newest first"
    )
    status.add_argument("--all", action="store_true", help="finished ones too")
    status.add_argument(
        "--state",
        action="append",
        choices=WORKLOAD_STATES,
        metavar="STATE",
        help=f"{', '.join(WORKLOAD_STATES[:-1])} or {WORKLOAD_STATES[-1]} (repeat for several; "
        "default: pending, admitted and running)",
    )
    status.add_argument("--queue")
    status.add_argument("--namespace")
    status.set_defaults(run=do_status)
    nodes = commands.add_parser(
        "nodes", help="the pool's nodes: flavor, state, healthy GPUs and why not all"
    )
    nodes.add_argument("--flavor")
    nodes.add_argument(
        "--state",
        action="append",
        choices=NODE_STATES,
        metavar="STATE",
        help=f"{', '.join(NODE_STATES[:-1])} or {NODE_STATES[-1]} (repeat for several; "
        "cordoned is gpupool's cordon, a cordon made in the cluster is excluded)",
    )
    nodes.add_argument("--unhealthy", action="store_true", help="only nodes with a broken GPU")
    nodes.set_defaults(run=do_nodes)
    node_commands = nodes.add_subparsers(dest="node_verb", metavar="{drain,end-drain}")
    drain = node_commands.add_parser(
        "drain", help="admins: cordon a node and have the control loop evict its work"
    )
    drain.set_defaults(run=do_drain)
    end_drain = node_commands.add_parser(
        "end-drain",
        help="admins: end a node's drain; it is uncordoned and nothing more is evicted",
    )
    end_drain.set_defaults(run=do_end_drain)
    for each in (drain, end_drain):
        each.add_argument("node", metavar="NAME")
        each.add_argument("--reason", help="kept in the audit log")
    submit = commands.add_parser(
        "submit", help="submit a workload from a file or flags (command after --)"
    )
    add_workload_flags(submit)
    submit.set_defaults(run=do_submit)
    dry = commands.add_parser("dry-run", help="would it start now? (exit 3 if not)")
    add_workload_flags(dry)
    dry.set_defaults(run=do_dry_run)
    why = commands.add_parser("why", help="why a workload waits, its position and start")
    why.add_argument("workload", type=qualified, metavar="NAMESPACE/NAME")
    why.set_defaults(run=do_why)
    cancel = commands.add_parser("cancel", help="cancel a workload, running or not")
    cancel.add_argument("workload", type=qualified, metavar="NAMESPACE/NAME")
    cancel.add_argument("--reason")
    cancel.set_defaults(run=do_cancel)
    request_kinds = add_request_commands(commands)
    # Also after the command: `gpupool nodes --json`, `gpupool nodes drain n1 --json`.
    subcommands = [*node_commands.choices.values(), *request_kinds.choices.values()]
    for command in [*commands.choices.values(), *subcommands]:
        command.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="print the API's JSON"
        )
    for each in [top, *commands.choices.values(), *subcommands]:
        if isinstance(each, Parser):
            each.json_errors = json_errors
    return top


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    """Run one command; returns the exit status. A reader that stops reading early
    (``gpupool status | head -1``) ends it quietly, as it does a Unix tool: no traceback."""
    try:
        status = run(argv, out, err)
        out.flush()  # inside: what is still buffered may meet the closed pipe too
    except BrokenPipeError:
        return reader_gone(out)
    return status


def reader_gone(out: TextIO) -> int:
    """The reader of ``out`` went away: point its descriptor at /dev/null, so the flush at
    exit writes nowhere instead of raising again, and say so by the exit status
    (the recipe of Python's signal module documentation, "Note on SIGPIPE")."""
    try:
        descriptor = out.fileno()
    except (AttributeError, OSError, ValueError):
        return EXIT_BROKEN_PIPE  # not a file (a test's buffer): nothing will flush it
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    os.close(devnull)
    return EXIT_BROKEN_PIPE


def report(error: dict[str, Any], as_json: bool, err: TextIO, status: int, text: str) -> int:
    """Print an error on standard error -- with ``--json`` the API's error object as one line
    of ``{"error": {...}}``, else ``gpupool: TEXT`` -- and return ``status``."""
    err.write(json.dumps({"error": error}) + "\n" if as_json else f"gpupool: {text}\n")
    return status


def usage(error: Exception) -> dict[str, Any]:
    """A usage error (the command line, the workload file, the settings) in the API's shape."""
    return {"status": None, "code": "usage", "message": str(error)}


def run(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> int:
    """Parse the command line and run the command; returns the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in arguments:
        split = arguments.index("--")
        arguments, command = arguments[:split], arguments[split + 1 :]
    as_json = "--json" in arguments
    arguments = duration_values_joined(arguments)
    try:
        options = parser(json_errors=as_json).parse_args(arguments)
    except SystemExit as stop:
        return int(stop.code or 0)
    except UsageError as error:
        return report(usage(error), as_json, err, EXIT_USAGE, str(error))
    options.command = command
    options.err = err
    try:
        api = Api(load())
        if options.verb != "login" and not api.settings.token:
            raise UsageError("not logged in: run `gpupool login` or set GPUPOOL_TOKEN")
        return int(options.run(api, options, out))
    except (UsageError, ConfigError) as error:
        return report(usage(error), options.json, err, EXIT_USAGE, str(error))
    except ApiError as error:
        return report(error.body, options.json, err, EXIT_REFUSED, str(error))
    except (KeyboardInterrupt, EOFError):
        err.write("\n")
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
