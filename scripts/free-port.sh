# Sourced by control-plane.sh and real-node.sh: free_port prints a TCP port nobody listens on
# 127.0.0.1, below the kernel's ephemeral range (so an outgoing connection cannot take it in the
# meantime) and not handed out before in this control plane (recorded in $dir/ports).
free_port() {
  local p low
  low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  (( low > 12000 )) || low=32768
  for _ in $(seq 1 200); do
    p=$(( (RANDOM << 15 | RANDOM) % (low - 11000) + 11000 ))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && ! grep -qx "$p" "$dir/ports" 2>/dev/null; then
      echo "$p" >> "$dir/ports"
      echo "$p"
      return
    fi
  done
  echo "no free port" >&2
  exit 1
}
