#!/bin/sh
# Prints from every node, on a virtual-time schedule.
i=0
while [ $i -lt 7 ]; do
  echo "hello from $NODE_NAME (node $NODE_ID of $PEERS) at uptime $(cut -d' ' -f1 /proc/uptime)"
  touch /tmp/said-hello
  i=$((i + 1))
  sleep 10
done
