#!/bin/bash
# systemd for real: boots systemd as PID 1 in a container (tfx-systemd:latest, deploy/docker/Dockerfile.systemd:
# the Debian 12 base plus Debian's systemd, tfx-node and the units as `cmake --install` lays them out), with no
# network but its own loopback. Inside it:
#   - `systemd-analyze verify` of tfx-node@chief.service, tfx.target and tfx-serve.service prints nothing (any output fails);
#   - `systemd-analyze security tfx-node@chief.service` rates the sandbox (must stay at or below 2.0);
#   - the shipped deploy/systemd/*.env.example files, installed as /etc/tfx/<instance>.env as deploy/README.md
#     says, carry TF_CONFIG on 127.0.0.1; the five instances are enabled into tfx.target and started with it;
#   - `systemctl status tfx-node@chief` shows the sd_notify STATUS line with the step while it trains;
#   - the short run completes: the chief's unit ends with Result=success and status 0, metrics.jsonl in the
#     StateDirectory holds the final evaluation with accuracy >= 0.80, metrics.jsonl belongs to a dynamic UID;
#   - a worker killed with SIGKILL is restarted by Restart=on-failure;
#   - tfx-serve.service, enabled into tfx.target beside them and started with it, serves the run's final step.
# On this VM --privileged cannot work (Docker 20.10 asks for every capability and the VM lacks
# CAP_SYS_RESOURCE), so the container gets every capability but that one, unconfined seccomp and AppArmor, and
# its own cgroup namespace; its init script makes the cgroup v1 mounts writable (see systemd-init.sh).
. "$(dirname "$0")/common.sh"

STEPS=1500
need_docker --systemd
NAME=tfxsd$$
at_exit "dk rm -f $NAME"
inside() { dk exec "$NAME" "$@"; }

mkdir -p "$WORK/etc"
for n in chief ps0 ps1 worker0 worker1; do cp "$SRC/deploy/systemd/$n.env.example" "$WORK/etc/$n.env"; done
experiment "$WORK/etc/experiment.json" training.max_steps=$STEPS eval.every_steps=0 || fail "cannot write the experiment"
chmod -R a+rX "$WORK/etc"

dk run -d --name "$NAME" --hostname tfx-host --network none \
  --cap-add ALL --cap-drop SYS_RESOURCE --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
  --security-opt systempaths=unconfined --cgroupns private --tmpfs /run --tmpfs /run/lock \
  -v "$WORK/etc:/etc/tfx:ro" tfx-systemd:latest >/dev/null || fail "cannot start the systemd container"
booted() { case "$(inside systemctl is-system-running 2>/dev/null)" in running | degraded) return 0 ;; esac; return 1; }
wait_for 90 booted || { dk logs "$NAME" 2>&1 | tail -20; fail "systemd did not finish booting within 90 s: $(inside systemctl is-system-running)"; }
[ "$(inside cat /proc/1/comm)" = systemd ] || fail "PID 1 is $(inside cat /proc/1/comm), not systemd"
inside systemctl --failed --no-legend --plain >"$WORK/failed.txt" 2>&1
[ -s "$WORK/failed.txt" ] && { cat "$WORK/failed.txt"; fail "units failed while booting"; }
echo "systemd: booted as PID 1 in $NAME ($(inside systemctl --version | head -1))"

# Static checks against the installed units, where the binary and every unit they name exist.
inside systemd-analyze verify --man=no tfx-node@chief.service tfx.target tfx-serve.service >"$WORK/verify.txt" 2>&1
[ -s "$WORK/verify.txt" ] && { cat "$WORK/verify.txt"; fail "systemd-analyze verify printed the above"; }
score=$(inside systemd-analyze security tfx-node@chief.service 2>&1 | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
le "${score:-none}" 2.0 || fail "systemd-analyze security rates tfx-node@chief.service ${score:-(no score)}, want <= 2.0"
echo "systemd: verify clean; systemd-analyze security: exposure $score"

inside systemctl enable tfx-node@ps0 tfx-node@ps1 tfx-node@chief tfx-node@worker0 tfx-node@worker1 tfx-serve \
  >/dev/null 2>&1 \
  || fail "systemctl enable failed"
timeout 120 "$DOCKER_CLI" exec "$NAME" systemctl start tfx.target || fail "systemctl start tfx.target failed or hung"

# While it trains, the chief's sd_notify STATUS carries the step.
status_line() {
  inside systemctl status --no-pager tfx-node@chief >"$WORK/status.txt" 2>&1
  grep -Eq "Status: \"chief: step [1-9][0-9]* of $STEPS" "$WORK/status.txt"
}
wait_for 120 status_line || { cat "$WORK/status.txt"; fail "systemctl status tfx-node@chief shows no STATUS with the step"; }
line=$(grep -o 'Status: .*' "$WORK/status.txt")
echo "systemd: systemctl status tfx-node@chief -> $line"

# Restart=on-failure: SIGKILL worker1's main process mid-run; systemd starts it again (RestartSec=5s).
pid=$(inside systemctl show -p MainPID --value tfx-node@worker1)
[ "${pid:-0}" -gt 0 ] || fail "tfx-node@worker1 has no main process"
inside bash -c "kill -9 $pid" || fail "cannot kill worker1"
restarted() { [ "$(inside systemctl show -p NRestarts --value tfx-node@worker1)" -ge 1 ]; }
wait_for 60 restarted || fail "tfx-node@worker1 was not restarted after SIGKILL"
echo "systemd: tfx-node@worker1 killed with SIGKILL, restarted by Restart=on-failure"

show() { inside systemctl show -p "$2" --value "tfx-node@$1"; }
done_ok() { [ "$(show chief ActiveState)" = inactive ] && [ "$(show chief Result)" = success ]; }
wait_for 300 done_ok || { inside journalctl -u tfx-node@chief --no-pager | tail -20; fail "the chief did not finish: $(show chief ActiveState) $(show chief Result)"; }
[ "$(show chief ExecMainStatus)" = 0 ] || fail "the chief exited $(show chief ExecMainStatus)"
for u in ps0 ps1 worker0 worker1; do
  stopped() { [ "$(show "$u" ActiveState)" = inactive ]; }
  wait_for 60 stopped || fail "tfx-node@$u still $(show "$u" ActiveState) after the chief finished"
  [ "$(show "$u" Result)" = success ] || { inside journalctl -u "tfx-node@$u" --no-pager | tail -10; fail "tfx-node@$u ended with $(show "$u" Result)"; }
done

inside cat /var/lib/tfx/metrics.jsonl >"$WORK/metrics.jsonl" || fail "no /var/lib/tfx/metrics.jsonl"
step=$(metric "$WORK/metrics.jsonl" eval step)
acc=$(metric "$WORK/metrics.jsonl" eval accuracy)
[ "$step" = "$STEPS" ] || fail "last evaluation at step $step, want $STEPS"
ge "$acc" 0.80 || fail "eval accuracy $acc < 0.80"
# DynamicUser= picks the UID from systemd's dynamic range (61184-65519) and releases it when the units stop.
uid=$(inside stat -c %u /var/lib/private/tfx/metrics.jsonl)
[ "$uid" -ge 61184 ] && [ "$uid" -le 65519 ] || fail "metrics.jsonl is owned by UID $uid, not a dynamic user's"
inside journalctl -u tfx-node@chief --no-pager | grep -q "MASTER-START" || fail "the chief's log is not in the journal"
# tfx-serve.service, started with tfx.target (it is ready while it waits for the run's first checkpoint, so the
# target's start is not held until then), follows the run to its final checkpoint.
served() {
  inside bash -c 'exec 3<>/dev/tcp/127.0.0.1/8501 && printf "GET /v1/models/fashion_mnist_mlp HTTP/1.0\r\n\r\n" >&3 && cat <&3' \
    2>/dev/null | grep -q "\"step\": $STEPS"
}
wait_for 60 served || { inside journalctl -u tfx-serve --no-pager | tail -10; fail "tfx-serve does not serve step $STEPS"; }
[ "$(inside systemctl show -p ActiveState --value tfx-serve)" = active ] || fail "tfx-serve is not active"
pass "systemd ran the 5 units (Type=notify, dynamic UID $uid, sandbox exposure $score) to eval accuracy $acc at step $STEPS; tfx-serve serves it"
