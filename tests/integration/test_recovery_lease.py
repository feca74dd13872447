"""The recovery lease (issue 23, seeds/003's recovery leader): instances
sharing `store = nats` that recover together elect one, through the store
record workmanager/recovery/leader, to do what is done once for all: with
`broker = nats`, deleting the consumers of workers that are gone.  Every
instance restores every worker all the same."""

import threading

from nats_lib import nats, nats_daemon  # noqa: F401 (nats is a fixture)


LEADS = "holds the recovery lease"
FOLLOWS = "the broker's recovery is left to it"


def test_three_instances_started_together_elect_one(wm_builddir, tmp_path,
                                                    nats):
    ds = [nats_daemon(wm_builddir, tmp_path / n, nats, broker="nats")
          for n in ("a", "b", "c")]
    seed = nats_daemon(wm_builddir, tmp_path / "seed", nats).start()
    seed.create(name="w1", topic="t")
    assert seed.stop() == 0
    ts = [threading.Thread(target=d.start) for d in ds]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    try:
        for d in ds:
            d.wait_for(lambda: "workers restored" in d.log(),
                       what="its recovery")
        leads = [d for d in ds if LEADS in d.log()]
        follows = [d for d in ds if FOLLOWS in d.log()]
        assert len(leads) == 1, [d.log() for d in ds]
        assert len(follows) == 2
        for d in ds:  # every instance restored the worker all the same
            assert d.get("/v1/workers/w1").json["status"] == "running"
    finally:
        for d in ds:
            assert d.stop() == 0


def test_the_leader_deletes_the_consumers_of_deleted_workers(wm_builddir,
                                                            tmp_path, nats):
    """A worker deleted while no broker = nats instance ran (through an
    instance with the embedded broker) leaves its consumer in the stream;
    the next recovery's leader deletes it, and keeps the others'."""
    a = nats_daemon(wm_builddir, tmp_path / "a", nats, broker="nats").start()
    gone = a.create(name="gone", topic="t")["id"]
    kept = a.create(name="kept", topic="t")["id"]
    assert a.stop() == 0
    e = nats_daemon(wm_builddir, tmp_path / "e", nats).start()  # embedded
    assert e.delete("/v1/workers/gone").status in (200, 204)
    assert e.stop() == 0
    a2 = nats_daemon(wm_builddir, tmp_path / "a2", nats,
                     broker="nats").start()
    try:
        a2.wait_for(lambda: "consumer(s) of deleted workers deleted"
                    in a2.log(), what="the purge")
        log = a2.log()
        assert LEADS in log
        assert f"({gone}) deleted: no worker has it any more" in log, log
        assert f"({kept}) deleted" not in log
        assert "1 consumer(s) of deleted workers deleted" in log
    finally:
        assert a2.stop() == 0
