"""Compose-time validation of ``collector.proton`` options and Proton's mode string."""

from __future__ import annotations

import dataclasses

import pytest
from aorta_proton.options import (
    GRANULARITIES,
    ProtonOptions,
    check,
    render_mode,
)

from aorta_core import OptionError


def opts(**kw) -> ProtonOptions:
    return ProtonOptions(**kw)


def test_defaults_are_valid_and_render_no_mode():
    check(opts(), {"proton": opts()})
    assert render_mode(opts()) is None
    assert {f.name: f.default for f in dataclasses.fields(ProtonOptions)} == {
        "mode": "auto",
        "backend": "auto",
        "context": "shadow",
        "data": "tree",
        "backend_mode": None,
        "instrumentation_mode": None,
        "granularity": None,
        "hook": None,
    }


@pytest.mark.parametrize(
    ("key", "value", "listed"),
    [
        ("mode", "cmd", "auto, cli, env"),
        ("backend", "cupti_pcsampling", "auto, cupti, roctracer, rocprofiler, instrumentation"),
        ("context", "stack", "shadow, python"),
        ("data", "hatchet", "tree, trace"),
        ("hook", "launch", "triton"),
        ("instrumentation_mode", "pcsampling", "default, mma"),
    ],
)
def test_bad_enum_value_names_key_value_and_valid_ones(key, value, listed):
    with pytest.raises(OptionError) as err:
        check(
            opts(
                **{key: value, "backend": "instrumentation"} if key != "backend" else {key: value}
            ),
            {},
        )
    message = str(err.value)
    assert f"collector.proton.{key}" in message
    assert repr(value) in message
    assert listed in message
    assert "\n" not in message


@pytest.mark.parametrize("backend", ["auto", "cupti", "instrumentation"])
def test_cli_accepts_backends_that_do_not_need_the_runtime_first(backend):
    check(opts(backend=backend), {})


@pytest.mark.parametrize("backend", ["roctracer", "rocprofiler"])
def test_cli_refuses_pinned_queue_tracers_env_accepts_them(backend):
    with pytest.raises(OptionError, match=r"cannot be pinned under mode: cli.*mode: env"):
        check(opts(backend=backend, mode="cli"), {})
    check(opts(backend=backend, mode="env"), {})
    check(opts(backend=backend), {})  # auto: refused by the wrap if it picks cli


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_every_granularity_with_instrumentation(granularity):
    options = opts(backend="instrumentation", granularity=granularity)
    check(options, {})
    assert render_mode(options) == f"default:granularity={granularity}"


def test_instrumentation_mode_rendering():
    assert render_mode(opts(backend="instrumentation", instrumentation_mode="mma")) == "mma"
    assert (
        render_mode(opts(backend="instrumentation", instrumentation_mode="mma", granularity="cta"))
        == "mma:granularity=cta"
    )


@pytest.mark.parametrize("knob", [{"instrumentation_mode": "default"}, {"granularity": "warp"}])
def test_intra_kernel_knobs_need_instrumentation(knob):
    with pytest.raises(OptionError, match="need backend: instrumentation, not backend: cupti"):
        check(opts(backend="cupti", **knob), {})


@pytest.mark.parametrize(
    ("backend", "spec"),
    [
        ("cupti", "pcsampling"),
        ("cupti", "pcsampling:interval=500"),
        ("cupti", "periodic_flushing"),
        ("cupti", "periodic_flushing:format=chrome_trace"),
        ("rocprofiler", "pcsampling"),
        ("roctracer", "periodic_flushing:format=hatchet"),
    ],
)
def test_backend_mode_accepted_and_rendered_verbatim(backend, spec):
    options = opts(backend=backend, backend_mode=spec, mode="env")
    check(options, {})
    assert render_mode(options) == spec


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (
            {"backend": "cupti", "backend_mode": "pcsampling", "granularity": "warp"},
            "conflicts with",
        ),
        ({"backend": "auto", "backend_mode": "pcsampling"}, "requires an explicit backend"),
        ({"backend": "instrumentation", "backend_mode": "pcsampling"}, "requires an explicit"),
        (
            {"backend": "roctracer", "backend_mode": "pcsampling", "mode": "env"},
            "for backend: roctracer",
        ),
        ({"backend": "cupti", "backend_mode": "sampling"}, "'sampling' is not one of"),
        ({"backend": "cupti", "backend_mode": "pcsampling:interval=0"}, "positive integer"),
        ({"backend": "cupti", "backend_mode": "pcsampling:interval=x"}, "positive integer"),
        ({"backend": "cupti", "backend_mode": "pcsampling:format=hatchet"}, "knob 'format'"),
        (
            {"backend": "cupti", "backend_mode": "periodic_flushing:format=csv"},
            "'csv' is not one of",
        ),
    ],
)
def test_backend_mode_refusals(kw, match):
    with pytest.raises(OptionError, match=match):
        check(opts(**kw), {})
