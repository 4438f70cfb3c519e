#!/usr/bin/env python3
"""FLEET's Slurm integration (deploy/slurm/) against the real Slurm daemons and fleetd --demo.

Each run starts, in a fresh temporary directory and on ports chosen at run time:
  - fleetd --demo (the emulated Polatis switch, the Gen1 inventory, an emulated agent per host);
  - munged with its own key and socket;
  - slurmctld and two slurmd on 127.0.0.1 from a generated slurm.conf, with the spank_fleet
    plugin (plugstack.conf) and the hooks of deploy/slurm/fleet_slurm.py as PrologSlurmctld,
    EpilogSlurmctld and TaskProlog. Slurm node `server1` is FLEET host server1 by name; Slurm
    node `node2` is FLEET host server2 through a node map file.
Jobs submitted with sbatch --fleet=SPEC.yaml then get their topology before they start, see it
in their environment, and lose it when they end; a refused request holds the job with the
reason in `scontrol show job`. Everything started is stopped at the end, also on failure.

  python3 slurm_test.py [unittest arguments]     # the tests (ctest: label slurm)
  python3 slurm_test.py --bench 10               # submit -> running with and without --fleet

Environment: FLEET_BIN_DIR (fleetd, fleetctl), FLEET_SOURCE_DIR (the repository),
FLEET_SPANK_PLUGIN (the built spank_fleet.so; without it the test compiles the plugin with cc).
Exit 77 (ctest: skipped) only when the Slurm packages (slurmctld, slurmd, slurm-client, munge,
libslurm-dev) are absent; the reason is printed.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import sys
import time
import unittest
from typing import Dict, List, Optional

from slurm_site import WAIT, Site, eventually, require_slurm, which

SITE: Optional[Site] = None


def setUpModule() -> None:  # noqa: N802 (unittest's name)
    global SITE
    SITE = Site()


def tearDownModule() -> None:  # noqa: N802
    if SITE is not None:
        SITE.cleanup()


class SlurmTest(unittest.TestCase):
    site: Site

    def setUp(self) -> None:
        assert SITE is not None
        self.site = SITE
        self.site.write_hook_config()
        self.held: List[str] = []

    def tearDown(self) -> None:
        self.site.cancel_all()  # Held jobs, and any a failed test left running.
        result = getattr(self._outcome, "result", None)
        if result is not None and any(test is self for test, _ in
                                      result.failures + result.errors):
            print(self.site.logs(), file=sys.stderr)

    def spec(self, name: str, text: str) -> str:
        self.site.write(name, text)
        return name

    def wait_state(self, job: str, states: tuple, timeout: float = WAIT) -> Dict[str, str]:
        fields: Dict[str, str] = {}

        def reached() -> bool:
            nonlocal fields
            fields = self.site.job(job)
            return fields.get("JobState") in states

        self.assertTrue(eventually(reached, timeout),
                        f"job {job} never reached {states}: {fields.get('_text')}")
        return fields

    def wait_env(self, job: str) -> Dict[str, str]:
        path = os.path.join(self.site.dir, "jobs", f"{job}.env")
        self.assertTrue(eventually(lambda: os.path.exists(path)),
                        f"job {job} did not start: {self.site.job(job).get('_text')}")
        return self.site.job_env(job)

    def check_running_allocation(self, job: str, env: Dict[str, str],
                                 ranks: int) -> dict:
        """The job's allocation is READY with its circuits on the emulated switch, and the job
        has `ranks` ranks."""
        allocation = env.get("FLEET_ALLOCATION")
        self.assertTrue(allocation, f"no FLEET_ALLOCATION in the job's environment: {env}")
        found = [a for a in self.site.allocations(f"slurm-job-{job}") if a["id"] == allocation]
        self.assertEqual(len(found), 1, f"no allocation {allocation} named slurm-job-{job}")
        alloc = found[0]
        self.assertEqual(alloc["state"], "ALLOCATION_STATE_READY")
        # The job's id, the cluster's name and its submit time.
        self.assertRegex(alloc["request"].get("request_id", ""),
                         rf"^slurm-job-{job}\.fleettest\.\d{{8}}T\d{{6}}$")
        devices = env["FLEET_RANKS"].split(",")
        self.assertEqual(len(devices), ranks, env)
        self.assertEqual(env.get("FLEET_WORLD_SIZE"), str(ranks), env)
        self.assertTrue(set(devices) <= set(alloc["members"]),
                        f"{devices} vs {alloc['members']}")
        circuits = self.site.circuits(allocation)
        self.assertTrue(circuits, f"{allocation} has no circuits")
        pairs = {(x["ingress"], x["egress"]) for c in circuits for x in c["cross_connects"]}
        self.assertTrue(pairs <= self.site.switch_pairs(),
                        f"cross-connects {pairs} of {allocation} are not all on the switch")
        # The srun step saw the same environment (TaskProlog runs for every task).
        self.assertEqual(self.site.job_env(job, "srun").get("FLEET_RANKS"), env["FLEET_RANKS"])
        return {"allocation": alloc, "pairs": pairs}

    def check_released(self, job: str, allocation: str, pairs: set) -> None:
        self.assertTrue(eventually(lambda: not self.site.live(f"slurm-job-{job}")),
                        f"{allocation} of job {job} was not released: "
                        f"{self.site.allocations(f'slurm-job-{job}')}")
        self.assertTrue(eventually(lambda: not self.site.circuits(allocation)),
                        f"{allocation} still has circuits")
        self.assertTrue(eventually(lambda: not (pairs & self.site.switch_pairs())),
                        f"cross-connects {pairs} are still on the switch")

    # ----------------------------------------------------------------------------------

    def test_attach_gpus_by_count(self) -> None:
        """attach without host: the job's node (server1) gets two pooled GPUs; lease from the
        time limit, which a job name posing as fields of `scontrol show job` does not change;
        released when the job completes, and the job's files in state_dir go with it."""
        spec = self.spec("attach.yaml", "topology:\n  attach:\n    devices:\n      count:\n"
                                        "        - {kind: gpu, count: 2}\n")
        job = self.site.submit(spec, "--nodelist=server1", "--time=5",
                               "--job-name=x TimeLimit=UNLIMITED Restarts=7 SubmitTime=0")
        env = self.wait_env(job)
        running = self.check_running_allocation(job, env, ranks=2)
        request = running["allocation"]["request"]
        self.assertEqual(request["topology"]["attach"]["host"], "server1")
        self.assertEqual(request.get("lease"), f"{5 * 60 + 600}s")  # --time=5 plus 10m slack.
        self.assertEqual(env.get("FLEET_TENANT"), "team-a")
        # The ranks are the attached GPUs, not server1's CPUs whose O-NIC ports they use.
        self.assertEqual(env["FLEET_RANKS"].split(","),
                         running["allocation"]["members"][:2], env)
        self.assertTrue(all(r.startswith("gpu") for r in env["FLEET_RANKS"].split(",")), env)
        self.assertEqual(env.get("FLEET_RANK_HOSTS"), "server1,server1", env)
        self.site.go(job)
        self.assertEqual(self.wait_state(job, ("COMPLETED", "FAILED"))["JobState"], "COMPLETED")
        self.check_released(job, env["FLEET_ALLOCATION"], running["pairs"])
        state = os.path.join(self.site.dir, "fleet-state")
        self.assertTrue(eventually(lambda: not [f for f in os.listdir(state)
                                                if f.startswith(f"job-{job}.")]),
                        f"files of job {job} stayed in {state}: {os.listdir(state)}")

    def test_ring_of_gpus_cancelled(self) -> None:
        """A ring of four GPUs for a job on node2 (FLEET host server2 by the node map); it is
        cancelled while running and its circuits come off the switch."""
        spec = self.spec("ring.yaml", "topology:\n  template:\n    kind: ring-unidirectional\n"
                                      "    members:\n      count:\n"
                                      "        - {kind: gpu, count: 4}\n")
        job = self.site.submit(spec, "--nodelist=node2")
        env = self.wait_env(job)
        running = self.check_running_allocation(job, env, ranks=4)
        self.assertEqual(env.get("FLEET_RANK_ORDER"), "ring", env)
        self.site.slurm("scancel", job)
        self.wait_state(job, ("CANCELLED",))
        self.check_released(job, env["FLEET_ALLOCATION"], running["pairs"])

    def test_ring_over_the_jobs_nodes(self) -> None:
        """per_node: one CPU of each of the job's two nodes, in Slurm's node order, in a ring;
        the job fails (exit 3) and the allocation is released all the same."""
        probe = self.site.write("probe.yaml", "tenant: team-a\ntopology:\n  template:\n"
                                "    kind: ring-unidirectional\n    members:\n      count:\n"
                                "        - {kind: cpu, count: 1, host: server1}\n"
                                "        - {kind: cpu, count: 1, host: server2}\n")
        dry = self.site.fleet("topology", "request", "-f", probe, "--dry-run", check=False)
        if dry.returncode != 0 and "host" in dry.stderr:
            self.skipTest(f"this fleetctl takes no host: in a count entry: {dry.stderr.strip()}")
        spec = self.spec("cpu-ring.yaml", "topology:\n  template:\n    kind: ring-unidirectional\n"
                                          "    members:\n      per_node: {kind: cpu, count: 1}\n")
        job = self.site.submit(spec, "--nodes=2", exit_code=3)
        env = self.wait_env(job)
        running = self.check_running_allocation(job, env, ranks=2)
        ranks = env["FLEET_RANKS"].split(",")
        self.assertEqual(sorted(r.split("-")[0] for r in ranks), ["server1", "server2"], env)
        self.assertEqual(sorted(env.get("FLEET_RANK_HOSTS", "").split(",")),
                         ["server1", "server2"], env)
        self.assertEqual(env.get("FLEET_RANK_ORDER"), "ring", env)
        self.site.go(job)
        self.assertEqual(self.wait_state(job, ("COMPLETED", "FAILED"))["JobState"], "FAILED")
        self.check_released(job, env["FLEET_ALLOCATION"], running["pairs"])

    def test_refused_request_holds_the_job(self) -> None:
        """99 GPUs: fleetd refuses, the job never runs, and is held (not requeued again and
        again) with fleetd's error in AdminComment."""
        spec = self.spec("too-many.yaml", "topology:\n  attach:\n    devices:\n      count:\n"
                                          "        - {kind: gpu, count: 99}\n")
        job = self.site.submit(spec)
        self.held.append(job)
        fields: Dict[str, str] = {}

        def held() -> bool:
            nonlocal fields
            fields = self.site.job(job)
            # COMPLETING a moment first: slurmctld requeues the job after the failed prolog.
            return (fields.get("JobState") == "PENDING" and fields.get("Reason") == "JobHeldAdmin"
                    and "AdminComment" in fields)

        self.assertTrue(eventually(held), f"job {job} not held: {fields.get('_text')}")
        print(f"\nrefused job {job}:\n" + "\n".join(
            line for line in fields["_text"].splitlines()
            if re.search(r"JobState|AdminComment|Restarts", line)), file=sys.stderr)
        self.assertEqual(fields["JobState"], "PENDING")
        comment = fields["AdminComment"]
        self.assertIn("fleet: not started: fleetd refused", comment)
        self.assertIn("too-many.yaml", comment)
        self.assertIn("RESOURCE_EXHAUSTED", comment)
        self.assertIn("99", comment)
        squeue = self.site.slurm("squeue", "-h", "-j", job, "-o", "%T %r").stdout.split()
        self.assertEqual(squeue, ["PENDING", "JobHeldAdmin"])
        self.assertFalse(os.path.exists(os.path.join(self.site.dir, "jobs", f"{job}.started")))
        self.assertEqual(self.site.live(f"slurm-job-{job}"), [])

    def test_not_ready_in_time_holds_the_job(self) -> None:
        """The switch answers slowly: the topology is not READY within ready_timeout, so the
        job is held saying so and nothing stays on the switch."""
        self.site.write_hook_config(ready_timeout="2s")
        before = self.site.switch_pairs()
        spec = self.spec("slow.yaml", "topology:\n  template:\n    kind: ring-unidirectional\n"
                                      "    members:\n      count:\n"
                                      "        - {kind: gpu, count: 4}\n")
        self.site.switch_fault({"latency_ms": 1500})
        try:
            job = self.site.submit(spec)
            self.held.append(job)
            fields: Dict[str, str] = {}

            def held() -> bool:
                nonlocal fields
                fields = self.site.job(job)
                return (fields.get("JobState") == "PENDING"
                        and fields.get("Reason") == "JobHeldAdmin" and "AdminComment" in fields)

            self.assertTrue(eventually(held, 120), f"job {job} not held: {fields.get('_text')}")
        finally:
            self.site.switch_fault(None)
        self.assertIn("not READY within 2s", fields["AdminComment"])
        self.assertFalse(os.path.exists(os.path.join(self.site.dir, "jobs", f"{job}.started")))
        self.assertTrue(eventually(lambda: not self.site.live(f"slurm-job-{job}")))
        self.assertTrue(eventually(lambda: self.site.switch_pairs() <= before),
                        "cross-connects of the late allocation stayed on the switch")

    def test_bad_spec_holds_the_job(self) -> None:
        """A spec error the prolog finds names the field, the value and the rule."""
        spec = self.spec("elsewhere.yaml", "topology:\n  attach:\n    host: server3\n"
                                           "    devices: [gpu1]\n")
        job = self.site.submit(spec, "--nodelist=server1")
        self.held.append(job)
        self.assertTrue(eventually(lambda: self.site.job(job).get("Reason") == "JobHeldAdmin"
                                   and self.site.job(job).get("JobState") == "PENDING"))
        self.assertIn("topology.attach.host 'server3' is not one of the job's nodes (server1)",
                      self.site.job(job)["AdminComment"])

    def wait_held(self, job: str, timeout: float = WAIT) -> Dict[str, str]:
        fields: Dict[str, str] = {}

        def held() -> bool:
            nonlocal fields
            fields = self.site.job(job)
            return (fields.get("JobState") == "PENDING" and fields.get("Reason") == "JobHeldAdmin"
                    and "AdminComment" in fields)

        self.assertTrue(eventually(held, timeout), f"job {job} not held: {fields.get('_text')}")
        return fields

    def test_spec_errors_hold_the_job(self) -> None:
        """Hosts outside the job's nodes, whichever way the spec names them, and YAML aliases
        (a few hundred bytes could expand past the controller's memory) hold the job with the
        rule; what fleetd admitted for a device of another node is released."""
        bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
            f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
            for i in range(12)) + "topology: {attach: {devices: [gpu1]}}\n"
        cases = {
            "count-host.yaml": ("topology:\n  template:\n    kind: ring-unidirectional\n"
                                "    members:\n      count:\n"
                                "        - {kind: cpu, count: 1, host: server1}\n"
                                "        - {kind: cpu, count: 1, host: server2}\n",
                                "topology.template.members.count[1].host 'server2' is not one "
                                "of the job's nodes (server1)"),
            "other-cpu.yaml": ("topology:\n  links:\n    - {a: gpu5, b: server2-cpu0, "
                               "duplex: true}\n",
                               "the allocation took devices of hosts that are not the job's "
                               "(server1): server2-cpu0 (host server2)"),
            "bomb.yaml": (bomb, "line 1: YAML anchors and aliases (&name, *name) are not "
                                "allowed in a --fleet spec"),
        }
        jobs = {name: self.site.submit(self.spec(name, text), "--nodelist=server1")
                for name, (text, _) in cases.items()}
        for name, job in jobs.items():
            comment = self.wait_held(job)["AdminComment"]
            self.assertIn(cases[name][1], comment)
            self.assertEqual(self.site.live(f"slurm-job-{job}"), [])
        # The link to server2-cpu0 was admitted, then released by the prolog.
        with open(os.path.join(self.site.dir, "log", "fleet-slurm.log")) as f:
            self.assertRegex(f.read(), rf"prolog job {jobs['other-cpu.yaml']}: released a-")

    def test_spec_path_cannot_inject_fields(self) -> None:
        """The spec's path is the submitter's (newlines, bytes that are not UTF-8): written
        into job-ID.yaml it cannot add keys, such as another job's request_id (fleetd would
        answer with that job's allocation) or a second document."""
        first = self.site.submit(self.spec("first.yaml", "topology:\n  attach:\n    devices: "
                                           "[gpu2]\n"), "--nodelist=server1")
        first_env = self.wait_env(first)
        [first_alloc] = self.site.live(f"slurm-job-{first}")
        key = first_alloc["request"]["request_id"]
        evil = os.path.join(os.fsencode(os.path.join(self.site.dir, "jobs")),
                            b"x\ntenant: team-b\nrequest_id: " + key.encode() +
                            b"\nname: slurm-job-" + first.encode() + b"\n---\n\xff.yaml")
        with open(evil, "w") as f:
            f.write("topology:\n  attach:\n    devices: [gpu3]\n")
        job = self.site.submit(None, "--nodelist=server1", b"--fleet=" + evil)
        env = self.wait_env(job)
        self.assertNotEqual(env["FLEET_ALLOCATION"], first_env["FLEET_ALLOCATION"])
        [alloc] = self.site.live(f"slurm-job-{job}")
        self.assertEqual(alloc["id"], env["FLEET_ALLOCATION"])
        self.assertEqual(alloc["tenant"], "team-a")
        self.assertNotEqual(alloc["request"]["request_id"], key)
        with open(os.path.join(self.site.dir, "fleet-state", f"job-{job}.yaml")) as f:
            import yaml
            [document] = list(yaml.safe_load_all(f))
        self.assertEqual(document["request_id"], alloc["request"]["request_id"])
        self.assertEqual(document["name"], f"slurm-job-{job}")
        self.site.go(job)
        self.site.go(first)
        self.wait_state(job, ("COMPLETED",))
        self.wait_state(first, ("COMPLETED",))
        self.assertTrue(eventually(lambda: not self.site.live(f"slurm-job-{job}")
                                   and not self.site.live(f"slurm-job-{first}")))

    def test_cancelled_while_the_prolog_waits(self) -> None:
        """A job cancelled while its prolog waits for READY (the switch answers slowly) keeps
        nothing: whether slurmctld kills the prolog before fleetd admitted its request or the
        prolog sees the job gone after READY, no allocation stays live."""
        before = self.site.switch_pairs()
        spec = self.spec("slow-cancel.yaml", "topology:\n  template:\n    kind: "
                                             "ring-unidirectional\n    members:\n      count:\n"
                                             "        - {kind: gpu, count: 4}\n")
        log = os.path.join(self.site.dir, "log", "fleet-slurm.log")
        self.site.switch_fault({"latency_ms": 400})
        try:
            jobs = [self.site.submit(spec, "--nodelist=node2"),
                    self.site.submit(spec, "--nodelist=server1")]

            def requesting(job: str) -> bool:
                try:
                    with open(log) as f:
                        return f"prolog job {job}: requesting" in f.read()
                except FileNotFoundError:  # No hook has logged yet.
                    return False

            # One cancelled as soon as its request leaves, one once fleetd has admitted it.
            self.assertTrue(eventually(lambda: requesting(jobs[0])))
            self.site.slurm("scancel", jobs[0])
            self.assertTrue(eventually(lambda: requesting(jobs[1])
                                       and bool(self.site.allocations(f"slurm-job-{jobs[1]}"))))
            self.site.slurm("scancel", jobs[1])
            for job in jobs:
                self.wait_state(job, ("CANCELLED",))
            for job in jobs:
                self.assertTrue(eventually(lambda: not self.site.live(f"slurm-job-{job}"), 90),
                                f"job {job}: {self.site.live(f'slurm-job-{job}')} stayed live")
                self.assertFalse(os.path.exists(os.path.join(self.site.dir, "jobs",
                                                             f"{job}.started")))
        finally:
            self.site.switch_fault(None)
        self.assertTrue(eventually(lambda: self.site.switch_pairs() <= before),
                        "cross-connects of a cancelled job stayed on the switch")

    def test_broken_config_holds_the_job(self) -> None:
        """A config the prolog cannot use still holds the job saying why (plain scontrol),
        instead of letting Slurm requeue it and run the prolog again and again."""
        self.site.write_hook_config(bogus_key=1)
        job = self.site.submit(self.spec("any.yaml", "topology:\n  attach:\n    devices: "
                                         "[gpu4]\n"), "--nodelist=server1")
        comment = self.wait_held(job)["AdminComment"]
        self.assertIn("unknown key(s) bogus_key", comment)

    def test_sbatch_refuses_an_unreadable_or_large_spec(self) -> None:
        """The plugin reads the file at submission: a missing or oversized one stops sbatch,
        naming the file and the rule, and nothing is submitted."""
        # A name of their own: whether any job of it exists says whether sbatch submitted one,
        # whatever other jobs come and go meanwhile.
        name = f"refused-{time.monotonic_ns()}"
        script = self.site.write("plain.sh", "#!/bin/bash\ntrue\n")
        missing = self.site.slurm("sbatch", "-J", name, "--time=1", "--fleet=missing.yaml",
                                  script, check=False, cwd=os.path.join(self.site.dir, "jobs"))
        self.assertNotEqual(missing.returncode, 0)
        self.assertIn("cannot open FLEET spec 'missing.yaml': No such file or directory",
                      missing.stderr)
        self.site.write("huge.yaml", "#" * (64 * 1024 + 1))
        huge = self.site.slurm("sbatch", "-J", name, "--time=1", "--fleet=huge.yaml", script,
                               check=False, cwd=os.path.join(self.site.dir, "jobs"))
        self.assertNotEqual(huge.returncode, 0)
        self.assertIn("'huge.yaml' is 65537 bytes; it may be at most 65536 bytes", huge.stderr)
        # A FIFO would block a plain open(); the plugin opens without blocking and refuses it.
        os.mkfifo(os.path.join(self.site.dir, "jobs", "fifo.yaml"))
        fifo = self.site.slurm("sbatch", "-J", name, "--time=1", "--fleet=fifo.yaml", script,
                               check=False, cwd=os.path.join(self.site.dir, "jobs"), timeout=20)
        self.assertNotEqual(fifo.returncode, 0)
        self.assertIn("FLEET spec 'fifo.yaml' is not a regular file", fifo.stderr)
        self.assertEqual(self.site.slurm("squeue", "-h", "-t", "all", "-n", name,
                                         "-o", "%i").stdout.split(), [])

    def test_job_of_an_unprivileged_user(self) -> None:
        """The TaskProlog runs as the job's user, who may read the AdminComment of its job."""
        if not which("runuser"):
            self.skipTest("runuser (util-linux) is not installed")
        spec = self.spec("user.yaml", "topology:\n  attach:\n    devices:\n      count:\n"
                                      "        - {kind: gpu, count: 1}\n")
        os.chmod(os.path.join(self.site.dir, "jobs", spec), 0o644)
        job = self.site.submit(spec, "--nodelist=server1", user="nobody", wait_for_go=False)
        self.assertEqual(self.wait_state(job, ("COMPLETED", "FAILED"))["JobState"], "COMPLETED")
        env = self.site.job_env(job)
        self.assertTrue(env.get("FLEET_ALLOCATION"), env)
        self.assertEqual(env.get("FLEET_WORLD_SIZE"), "1", env)  # The GPU, not server1's CPU.
        self.assertTrue(eventually(lambda: not self.site.live(f"slurm-job-{job}")))

    def test_srun_and_salloc(self) -> None:
        """srun --fleet outside a job makes a job whose tasks get FLEET_*; salloc refused is
        cancelled (Slurm does not requeue an interactive job) with the reason shown."""
        jobs = os.path.join(self.site.dir, "jobs")
        self.spec("one-gpu.yaml", "topology:\n  attach:\n    devices:\n      count:\n"
                                  "        - {kind: gpu, count: 1}\n")
        run = self.site.slurm("srun", "--fleet=one-gpu.yaml", "--nodelist=server1", "--time=5",
                              "env",
                              cwd=jobs)
        env = dict(l.split("=", 1) for l in run.stdout.splitlines() if "=" in l)
        self.assertTrue(env.get("FLEET_ALLOCATION"), run.stdout + run.stderr)
        self.assertEqual(env.get("FLEET_WORLD_SIZE"), "1", env)
        name = f"slurm-job-{env['SLURM_JOB_ID']}"
        self.assertEqual([a["id"] for a in self.site.allocations(name)], [env["FLEET_ALLOCATION"]])
        self.assertTrue(eventually(lambda: not self.site.live(name)
                                   and not self.site.circuits(env["FLEET_ALLOCATION"])))
        self.spec("too-many.yaml", "topology:\n  attach:\n    devices:\n      count:\n"
                                   "        - {kind: gpu, count: 99}\n")
        refused = self.site.slurm("salloc", "--fleet=too-many.yaml", "-N1", "--time=5", "true",
                                  cwd=jobs,
                                  check=False)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("PrologSlurmctld failed", refused.stderr)
        job = re.search(r"Granted job allocation (\d+)", refused.stderr).group(1)
        fields = self.site.job(job)
        self.assertEqual(fields["JobState"], "CANCELLED")
        self.assertIn("RESOURCE_EXHAUSTED", fields["AdminComment"])

    def test_failed_release_is_logged(self) -> None:
        """The epilog cannot release (fleetd refuses it: a viewer's credentials): it retries,
        then logs the leak; the allocation's lease is left to release it."""
        spec = self.spec("leak.yaml", "topology:\n  attach:\n    devices: [gpu7]\n")
        job = self.site.submit(spec, "--nodelist=server1", "--time=2")
        env = self.wait_env(job)
        self.site.write_hook_config(context="demo-viewer", release_attempts=2,
                                    release_backoff="0.1s")
        self.site.go(job)
        self.wait_state(job, ("COMPLETED",))
        log = os.path.join(self.site.dir, "log", "fleet-slurm.log")

        def logged() -> bool:
            with open(log) as f:
                return f"LEAK WARNING: {env['FLEET_ALLOCATION']} is not released" in f.read()

        self.assertTrue(eventually(logged), "no LEAK WARNING in the hooks' log")
        with open(log) as f:
            self.assertIn("(attempt 2 of 2): PERMISSION_DENIED", f.read())
        [alloc] = self.site.live(f"slurm-job-{job}")
        self.assertEqual(alloc["request"]["lease"], f"{2 * 60 + 600}s")  # The backstop.
        self.site.fleet("topology", "release", env["FLEET_ALLOCATION"], "--wait")

    def test_lease_must_cover_the_time_limit(self) -> None:
        """No lease may outlive fleetd's longest (max_lease, 168h) or be left unbounded: a job
        without a time limit, or with one beyond max_lease less lease_slack, is held saying
        which --time it may have, instead of losing its fabric mid-run."""
        spec = self.spec("long.yaml", "topology:\n  attach:\n    devices: [gpu8]\n")
        long = self.site.submit(spec, "--nodelist=server1", "--time=30-00:00:00")
        unlimited = self.site.submit(spec, "--nodelist=server1", "--time=UNLIMITED")
        self.assertIn("time limit 30-00:00:00 plus lease_slack (600s) is longer than max_lease "
                      "(604800s), the longest FLEET lease: give --time of at most 6-23:50:00",
                      self.wait_held(long)["AdminComment"])
        self.assertIn("the job has no time limit (UNLIMITED); a --fleet job needs one",
                      self.wait_held(unlimited)["AdminComment"])
        self.assertEqual(self.site.live(f"slurm-job-{long}"), [])

    def test_job_without_fleet_is_untouched(self) -> None:
        job = self.site.submit(None, wait_for_go=False)
        self.assertEqual(self.wait_state(job, ("COMPLETED", "FAILED"))["JobState"], "COMPLETED")
        env = self.site.job_env(job)
        self.assertFalse({"FLEET_ALLOCATION", "FLEET_RANKS"} & set(env), env)
        self.assertNotIn("AdminComment", self.site.job(job))


# ---------------------------------------------------------------------------------------
# Benchmark: what the prolog adds to a job's start.


def bench(rounds: int) -> None:
    site = Site()
    try:
        spec = site.write("bench.yaml", "topology:\n  attach:\n    devices:\n      count:\n"
                                        "        - {kind: gpu, count: 2}\n")
        script = site.write("bench.sh", f"#!/bin/bash\ndate +%s.%N > "
                            f"{site.dir}/jobs/$SLURM_JOB_ID.started\n")
        results: Dict[str, List[float]] = {"without --fleet": [], "with --fleet": []}
        for i in range(rounds * 2):
            fleet = i % 2 == 1
            args = ["sbatch", "--parsable", "--nodelist=server1", "--time=10"]
            if fleet:
                args.append(f"--fleet={spec}")
            submitted = time.time()
            job = site.slurm(*args, script).stdout.strip()
            started = os.path.join(site.dir, "jobs", f"{job}.started")
            if not eventually(lambda: os.path.exists(started) and os.path.getsize(started) > 0):
                raise RuntimeError(f"bench job {job} did not start:\n{site.logs()}")
            with open(started) as f:
                results["with --fleet" if fleet else "without --fleet"].append(
                    float(f.read()) - submitted)
            # One job at a time: the next starts once this one's allocation is gone.
            eventually(lambda: site.job(job).get("JobState") in ("COMPLETED", "FAILED"))
            if fleet:
                eventually(lambda: not site.live(f"slurm-job-{job}"))
        prolog = []
        with open(os.path.join(site.dir, "log", "fleet-slurm.log")) as f:
            for line in f:
                m = re.search(r"ready in ([0-9.]+)s", line)
                if m:
                    prolog.append(float(m.group(1)))
        print(f"submit -> job running, {rounds} jobs each, one at a time, 2 slurmd on one "
              "machine, fleetd --demo (attach of 2 GPUs):")
        for name, values in results.items():
            print(f"  {name:16} median {statistics.median(values):.3f}s  mean "
                  f"{statistics.mean(values):.3f}s  min {min(values):.3f}s  max "
                  f"{max(values):.3f}s")
        added = (statistics.median(results["with --fleet"])
                 - statistics.median(results["without --fleet"]))
        print(f"  added by --fleet (median difference): {added:.3f}s")
        if prolog:
            print(f"  prolog, spec read -> READY -> AdminComment set: median "
                  f"{statistics.median(prolog):.3f}s  min {min(prolog):.3f}s  max "
                  f"{max(prolog):.3f}s")
    finally:
        site.stop()
        site.remove()


def interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--bench", type=int, default=0)
    args, rest = parser.parse_known_args()
    require_slurm()
    if args.bench:
        bench(args.bench)
        return
    # SIGTERM or Ctrl-C end the run; the Site's atexit handler stops every daemon.
    signal.signal(signal.SIGTERM, interrupt)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
