"""fairkv.bench / fairkv.frontier against the CLI they run."""
import json
import subprocess

import pytest

import fairkv


def cli(*args):
    return subprocess.run([fairkv.fairkv_binary(), "bench", *args], check=True, capture_output=True).stdout


@pytest.fixture(autouse=True)
def need_cli():
    if fairkv.fairkv_binary() is None:
        pytest.skip("no fairkv command installed beside the library")


def test_bench_equals_cli_json():
    got = fairkv.bench(workload="tenants", schemes=["lru", "fairkv"], requests=60, tenants=6, load=0.9,
                       reclaim=["quantize8", "evict"])
    raw = cli("--workload", "tenants", "--schemes", "lru,fairkv", "--requests", "60", "--tenants", "6",
              "--load", "0.9", "--reclaim", "quantize8,evict", "--format", "json")
    # the same document: key order, values, nesting
    assert json.dumps(got) == json.dumps(json.loads(raw))
    assert [s["name"] for s in got["schemes"]] == ["lru", "fairkv"] and got["requests"] == 60
    # and raw=True is the CLI's bytes exactly
    assert fairkv.bench(workload="tenants", schemes=["lru", "fairkv"], requests=60, tenants=6, load=0.9,
                        reclaim=["quantize8", "evict"], raw=True) == raw


def test_bench_options_change_the_run():
    a = fairkv.bench(schemes=["lru"], requests=40, seed=1)
    b = fairkv.bench(schemes=["lru"], requests=40, seed=2, host_gb=1, host_demote=True)
    assert a["seed"] == 1 and b["seed"] == 2 and a != b


def test_bench_refuses_unknown_options():
    with pytest.raises(fairkv.Error) as ei:
        fairkv.bench(schemes=["lru"], requests=10, reqests=5, colour="red")
    assert "reqests" in str(ei.value) and "colour" in str(ei.value)
    with pytest.raises(fairkv.Error) as ei:
        fairkv.bench(schemes=["lru"], native="yes")
    assert "native" in str(ei.value)
    # the CLI's own refusal comes back as an Error with its message
    with pytest.raises(fairkv.Error) as ei:
        fairkv.bench(schemes=["no-such-scheme"], requests=10)
    assert "no-such-scheme" in str(ei.value)


def test_frontier_equals_cli_json():
    got = fairkv.frontier(schemes=["lru"], requests=60)
    raw = cli("--schemes", "lru", "--requests", "60", "--frontier", "--format", "json")
    assert json.dumps(got) == json.dumps(json.loads(raw))
    assert got["frontier"][0]["scheme"] == "lru" and 0 < got["frontier"][0]["capacity_frac"] <= 1


def test_table_helper():
    r = fairkv.bench(schemes=["lru", "flru"], requests=40)
    t = fairkv.table(r, ["prefix_hit_rate", "e2e.p99_ms"])
    lines = t.splitlines()
    assert lines[0].split() == ["name", "prefix_hit_rate", "e2e.p99_ms"]
    assert [l.split()[0] for l in lines[1:]] == ["lru", "flru"]
    assert float(lines[1].split()[2]) == pytest.approx(r["schemes"][0]["e2e"]["p99_ms"], rel=1e-3)
