#!/bin/bash
# Chaos with replicated shards (cluster.replicas 1, #27): test_chaos.sh's random kill -9 of master, ps and workers
# every few seconds, each ps backed up by the next: a lost ps fails over to its backup and rejoins; a ps lost again
# before its backups were streamed back, or a chief restarted after a failover, must still end the run at
# max_steps (a restarted chief's plan epochs go on rising, a roll-back puts every instance back on its own ps, and a
# ps asked after a copy it lost answers "waiting-for-plan" instead of an error that stopped the cluster).
TFX_CHAOS_REPLICAS=1 exec bash "$(dirname "$0")/test_chaos.sh"
