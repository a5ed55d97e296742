# Plots of one benchmark-suite run (called by tools/bench/report.py):
#   gnuplot -e "kind='tcp'; dat='X-tcp.dat'; out='X-tcp'" plots.gp
# writes OUT-lat.png (latency vs size) and OUT-bw.png (bandwidth vs size),
# rdmaps beside its baseline measured in the same run. '?' = no figure.
set terminal pngcairo size 900,560 font ",11" noenhanced
set datafile missing "?"
set logscale x 2
set logscale y 10
set format x "%.0b%B"
set grid xtics ytics mxtics mytics lc rgb "#dddddd"
set key top left box opaque
set xlabel "message size [bytes]"
set style line 1 lc rgb "#1f77b4" lw 2 pt 7 ps 1.2
set style line 2 lc rgb "#ff7f0e" lw 2 pt 5 ps 1.2
set style line 3 lc rgb "#2ca02c" lw 2 dt 2 pt 9 ps 1.2
set style line 4 lc rgb "#d62728" lw 2 dt 2 pt 11 ps 1.2
set style line 5 lc rgb "#555555" lw 2 pt 13 ps 1.8

if (kind eq 'tcp') {
	set output out.'-lat.png'
	set title "TCP loopback: round-trip latency (median) against message size"
	set ylabel "latency [us]"
	plot dat u 1:2 w lp ls 1 t "rdmaps pull", \
	     dat u 1:3 w lp ls 2 t "rdmaps push (SGD applied)", \
	     dat u 1:4 w lp ls 3 t "qperf round trip (2 x tcp_lat)"
	set output out.'-bw.png'
	set title "TCP loopback: bandwidth against message size"
	set ylabel "bandwidth [MB/s, 10^6 B/s]"
	set key bottom right
	plot dat u 1:5 w lp ls 1 t "rdmaps pull", \
	     dat u 1:6 w lp ls 2 t "rdmaps push (SGD applied)", \
	     dat u 1:7 w lp ls 3 t "qperf tcp_bw", \
	     dat u 1:8 w p ls 5 t "iperf3 (stream)"
}
if (kind eq 'rdma') {
	set output out.'-lat.png'
	set title "SoftRoCE in a QEMU/TCG guest: round-trip latency (median) against message size"
	set ylabel "latency [us]"
	plot dat u 1:2 w lp ls 1 t "rdmaps pull (RDMA READ)", \
	     dat u 1:3 w lp ls 3 t "ib_read_lat (typical)", \
	     dat u 1:4 w lp ls 2 t "rdmaps push (SEND, SGD applied)", \
	     dat u 1:5 w lp ls 4 t "ib_send_lat round trip (2 x typical)"
	set output out.'-bw.png'
	set title "SoftRoCE in a QEMU/TCG guest: bandwidth against message size"
	set ylabel "bandwidth [MB/s, 10^6 B/s]"
	set key bottom right
	plot dat u 1:6 w lp ls 1 t "rdmaps pull", \
	     dat u 1:7 w lp ls 3 t "ib_read_bw", \
	     dat u 1:8 w lp ls 2 t "rdmaps push (SGD applied)", \
	     dat u 1:9 w lp ls 4 t "ib_send_bw"
}
