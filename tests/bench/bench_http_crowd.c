/* bench_http_crowd N: GET /metrics while N idle clients (half of them with
 * half a request) are connected to rps_http (http/http.c), default limits.
 * Issue #20's "40 slow HTTP clients made /metrics take 3-5 s". Never run by
 * ctest; docs/dashboard.md gives the figures, before and after. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/http.h"
#include "src/metrics.h"

static int conn_to(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		perror("connect");
		exit(1);
	}
	return fd;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 40, port, fd, *fds;
	const char *req = "GET /metrics HTTP/1.1\r\n\r\n";
	struct rps_metrics *reg;
	struct rps_metric *m;
	struct rps_http_server *srv;
	char buf[4096];
	ssize_t k;
	double t0;

	if (n < 0 || rps_metrics_create(&reg) ||
	    rps_metrics_counter(reg, "x_total", "x", NULL, &m) ||
	    rps_http_start("127.0.0.1", 0, NULL, rps_http_metrics_handler, reg, &srv))
		return 1;
	port = rps_http_port(srv);
	fds = calloc((size_t)n + 1, sizeof(int));
	for (int i = 0; i < n; i++) {
		fds[i] = conn_to(port);
		if (i % 2)
			send(fds[i], "GET /metr", 9, MSG_NOSIGNAL);
	}
	usleep(200000);
	t0 = now();
	fd = conn_to(port);
	send(fd, req, strlen(req), MSG_NOSIGNAL);
	k = recv(fd, buf, sizeof(buf) - 1, 0);
	printf("%d idle clients: GET /metrics answered in %.3f s (%.12s)\n", n, now() - t0,
	       k > 12 ? buf : "no answer");
	return 0;
}
