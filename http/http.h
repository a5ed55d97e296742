/* A small HTTP/1.1 server for Prometheus scrapes (GET /metrics), the
 * scheduler's dashboard and similar pages, on GNU libmicrohttpd (http/http.c).
 *
 * - rps_http_start binds and listens in the caller (so a busy port is an
 *   error there), then the library serves from a thread of its own; nothing
 *   it does blocks the caller afterwards.
 * - One request per connection (Connection: close). GET and HEAD; other
 *   methods 405 (a server started with rps_http_start_req also gets POST; a
 *   request body is never read: the connection closes after the answer). A malformed request is refused (400; 505 for an HTTP version
 *   other than 1.0/1.1); a request (line + headers) beyond about max_request
 *   bytes (the per-connection memory bound) 431; a connection idle for
 *   timeout_ms (rounded up to whole seconds: the library counts seconds) is
 *   closed without an answer; the server keeps serving. At most max_clients
 *   connections at a time; more wait in the listen backlog. Under pressure
 *   (3/4 of max_clients open) every connection's idle timeout drops to 1 s,
 *   so that idle clients make room quickly.
 * - One thread (epoll) serves every connection, non-blocking: a client that
 *   sends or reads slowly delays nobody. The handler runs on that thread, one
 *   request at a time: it must not block.
 */
#ifndef RPS_HTTP_H
#define RPS_HTTP_H

#include <stddef.h>
#include <stdint.h>

#define RPS_HTTP_TIMEOUT_MS  5000
#define RPS_HTTP_MAX_REQUEST 8192
#define RPS_HTTP_MAX_CLIENTS 512 /* lowered to a quarter of RLIMIT_NOFILE */

struct rps_http_opts {
	int timeout_ms;	    /* idle time before a connection is cut; <= 0: default */
	size_t max_request; /* memory per connection (request line + headers); 0: default */
	int max_clients;    /* connections served at once; <= 0: default */
};

/* Answer a GET/HEAD of `path` (the target without its ?query, NUL-terminated).
 * Return 0 with *body_p (rps_malloc'd; the server frees it with rps_free),
 * *len_p and *ctype_p (a static string; left NULL: "text/plain; charset=utf-8")
 * for 200; -ENOENT for 404; another negative errno for 500 (nothing set). */
typedef int (*rps_http_handler_fn)(const char *path, void *arg, char **body_p, size_t *len_p,
				   const char **ctype_p);

/* A request for rps_http_start_req's handler. */
struct rps_http_req {
	const char *method;	   /* "GET", "HEAD" or "POST" */
	const char *path;	   /* the target without its ?query */
	const char *authorization; /* the Authorization header, or NULL */
};

/* Its answer: code (0: 200), body (rps_malloc'd, handed over; NULL: empty),
 * ctype (static; NULL: text/plain). */
struct rps_http_resp {
	unsigned int code;
	char *body;
	size_t len;
	const char *ctype;
	const char *cache; /* Cache-Control value (static) or NULL */
	const char *csp;   /* Content-Security-Policy value (static) or NULL */
};

/* Return 0 with *rs filled (any code), -ENOENT for 404, another negative
 * errno for 500. */
typedef int (*rps_http_req_fn)(const struct rps_http_req *rq, void *arg, struct rps_http_resp *rs);

struct rps_http_server;

/* host: address to bind (NULL, "" or "*": every interface); port 0: ephemeral
 * (see rps_http_port). opts may be NULL. -EADDRINUSE, -EINVAL (host does not
 * resolve), -ENOMEM, other socket errors; logged. */
int rps_http_start(const char *host, uint16_t port, const struct rps_http_opts *opts,
		   rps_http_handler_fn fn, void *arg, struct rps_http_server **srv_p);
/* The same with a handler that sees the method (GET, HEAD, POST) and the
 * Authorization header and chooses the status code. */
int rps_http_start_req(const char *host, uint16_t port, const struct rps_http_opts *opts,
		       rps_http_req_fn fn, void *arg, struct rps_http_server **srv_p);
/* host as a person types it into a browser: "*", "" and NULL (every
 * interface) give "127.0.0.1"; an IPv6 literal is bracketed ("[::1]") into
 * a static buffer of this thread. */
const char *rps_http_shown_host(const char *host);
/* The bound port. */
uint16_t rps_http_port(const struct rps_http_server *srv);
/* Stop the thread, close every connection, free. NULL is fine. */
void rps_http_stop(struct rps_http_server *srv);

/* Handler serving "/metrics" from a registry (arg: struct rps_metrics *) as
 * text/plain; version=0.0.4; 404 for every other path. */
int rps_http_metrics_handler(const char *path, void *arg, char **body_p, size_t *len_p,
			     const char **ctype_p);

#endif
