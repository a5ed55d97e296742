# shellcheck shell=bash
# counters.sh: drop and retry counters of the SoftRoCE path, read before and
# after every benchmark run (sourced by guest-bench.sh and guest-loss.sh).
#
#   cnt_snap FILE            write "name value" lines: every rxe device's
#                            `rdma statistic` counters (rxeN.NAME), each veth's
#                            /sys/class/net/*/statistics (vethN.NAME), the sum
#                            of /proc/net/softnet_stat's dropped and
#                            time_squeeze columns, and netem's drops (tc -s)
#   cnt_diff BEFORE AFTER    one line: "drops D retries R [name +n ...]" with
#                            every counter that moved among those below
#
# drops   = the largest of veth tx_dropped, veth rx_dropped and softnet
#           dropped (one lost packet shows in all three) + qdisc (netem) drops
# retries = rxe completer_retry_err + rcvd_seq_err + duplicate_request +
#           out_of_seq_request + retry_exceeded_err + retry_rnr_exceeded_err +
#           rcvd_rnr_err + send_rnr_err
# A run with drops or retries that nobody asked for (no netem) measured a
# retransmission timeout, not the fabric: the report flags it (report.py).

cnt_snap() {
	local f=$1 d
	{
		# `rdma statistic show link rxe0/1`: "link rxe0/1 name value name value ..."
		if command -v rdma >/dev/null; then
			rdma statistic show 2>/dev/null | awk '
				$1 == "link" { split($2, a, "/"); dev = a[1]
					for (i = 3; i + 1 <= NF; i += 2) print dev "." $i, $(i + 1) }'
		fi
		for d in /sys/class/net/veth*; do
			[ -d "$d/statistics" ] || continue
			for c in rx_dropped tx_dropped rx_packets tx_packets; do
				echo "$(basename "$d").$c $(cat "$d/statistics/$c" 2>/dev/null || echo 0)"
			done
		done
		# softnet_stat: hex columns, 2nd = dropped (backlog full), 3rd = time_squeeze
		local line dd=0 sq=0 x
		while read -r -a line; do
			x=${line[1]:-0}; dd=$((dd + 16#$x))
			x=${line[2]:-0}; sq=$((sq + 16#$x))
		done </proc/net/softnet_stat
		echo "softnet.dropped $dd"
		echo "softnet.time_squeeze $sq"
		if command -v tc >/dev/null; then
			for d in /sys/class/net/veth*; do
				[ -e "$d" ] || continue
				tc -s qdisc show dev "$(basename "$d")" 2>/dev/null |
					awk -v n="$(basename "$d")" '/dropped/ { gsub(/[(),]/, " "); $0 = $0
						for (i = 1; i < NF; i++) if ($i == "dropped") q += $(i + 1) }
						END { print n ".qdisc_dropped", q + 0 }'
			done
		fi
	} >"$f"
}

cnt_diff() {
	awk '
		NR == FNR { a[$1] = $2; next }
		{
			d = $2 - ($1 in a ? a[$1] : 0)
			if (d == 0) next
			split($1, k, "."); c = k[2]
			# one packet lost to a full backlog counts in the sending veth
			# tx_dropped, the receiving veth rx_dropped and softnet: the largest
			if (c == "tx_dropped") { tx += d; moved = moved " " $1 " +" d }
			else if (c == "rx_dropped") { rx += d; moved = moved " " $1 " +" d }
			else if ($1 == "softnet.dropped") { sn += d; moved = moved " " $1 " +" d }
			else if (c == "qdisc_dropped") { qd += d; moved = moved " " $1 " +" d } else if (c == "completer_retry_err" || c == "rcvd_seq_err" || c == "duplicate_request" ||
				   c == "out_of_seq_request" || c == "retry_exceeded_err" ||
				   c == "retry_rnr_exceeded_err" || c == "rcvd_rnr_err" || c == "send_rnr_err") {
				retries += d; moved = moved " " $1 " +" d
			}
		}
		END {
			drops = tx; if (rx > drops) drops = rx; if (sn > drops) drops = sn
			printf "drops %d retries %d%s\n", drops + qd, retries, moved
		}' "$1" "$2"
}
