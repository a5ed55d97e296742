/* The /metrics endpoint on GNU libmicrohttpd: one internal polling thread
 * (the handler runs there, one request at a time), bounded connections,
 * bounded memory per connection, idle connections cut. See http/http.h.
 *
 * The listening socket is ours (bound here, handed to the daemon with
 * MHD_OPTION_LISTEN_SOCKET) so that a busy port, an address that is not ours
 * and a name that does not resolve keep their own error codes, and "every
 * interface" means IPv4 and IPv6 whatever bindv6only says. */
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/metrics.h"
#include "http/http.h"

#define HTTP_BACKLOG	   64
#define HTTP_DEFAULT_CTYPE "text/plain; charset=utf-8"

struct rps_http_server {
	struct MHD_Daemon *d;
	uint16_t port;
	rps_http_handler_fn fn;
	void *arg;
};

__attribute__((format(printf, 2, 0))) static void http_log(void *cls, const char *fmt,
							     va_list ap)
{
	char msg[256];

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	RPS_DEBUG("http: %s", msg);
}

static void body_free(void *p)
{
	rps_free(p);
}

/* Queue an answer; body (rps_malloc'd) is handed over, NULL: text (static). */
static enum MHD_Result respond(struct MHD_Connection *conn, unsigned int code, const char *ctype,
			       char *body, size_t blen, const char *text)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	if (body)
		r = MHD_create_response_from_buffer_with_free_callback(blen, body, body_free);
	else
		r = MHD_create_response_from_buffer(strlen(text), (void *)text,
						    MHD_RESPMEM_PERSISTENT);
	if (!r) {
		RPS_WARN("http: out of memory for a %zu-byte answer", body ? blen : strlen(text));
		rps_free(body);
		return MHD_NO; /* closes the connection */
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				ctype ? ctype : HTTP_DEFAULT_CTYPE);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	if (code >= 400)
		RPS_DEBUG("http: %u for %s", code, text ? text : "");
	ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size,
				  void **con_cls)
{
	struct rps_http_server *srv = cls;
	const char *ctype = NULL;
	char *body = NULL;
	size_t blen = 0;
	int rc;

	(void)upload_data;
	(void)upload_data_size;
	(void)con_cls;
	if (strcmp(version, MHD_HTTP_VERSION_1_1) && strcmp(version, MHD_HTTP_VERSION_1_0))
		return respond(conn, MHD_HTTP_BAD_REQUEST, NULL, NULL, 0, "bad request\n");
	if (url[0] != '/')
		return respond(conn, MHD_HTTP_BAD_REQUEST, NULL, NULL, 0, "bad request\n");
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return respond(conn, MHD_HTTP_METHOD_NOT_ALLOWED, NULL, NULL, 0,
			       "method not allowed\n");
	rc = srv->fn(url, srv->arg, &body, &blen, &ctype);
	if (rc == -ENOENT)
		return respond(conn, MHD_HTTP_NOT_FOUND, NULL, NULL, 0, "not found\n");
	if (rc) {
		RPS_WARN("http: handler for %s: %s", url, strerror(-rc));
		return respond(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, NULL, 0,
			       "internal error\n");
	}
	if (!body) /* an empty answer: the library needs a buffer of its own */
		body = rps_malloc(1);
	if (!body)
		return MHD_NO;
	return respond(conn, MHD_HTTP_OK, ctype, body, blen, NULL);
}

/* Bind and listen on host:port; the socket in *fd_p. */
static int http_listen(const char *node, uint16_t port, int *fd_p)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res, *ai;
	char portstr[8];
	int rc, one = 1;

	snprintf(portstr, sizeof(portstr), "%u", port);
	rc = getaddrinfo(node, portstr, &hints, &res);
	if (rc) {
		RPS_ERR("http: resolve %s: %s", node ? node : "*", gai_strerror(rc));
		return -EINVAL;
	}
	rc = -EADDRNOTAVAIL;
	for (ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

		if (fd < 0) {
			rc = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!node && ai->ai_family == AF_INET6) {
			int zero = 0; /* every interface: IPv4 too, whatever bindv6only says */

			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		}
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, HTTP_BACKLOG) < 0) {
			rc = -errno;
			close(fd);
			continue;
		}
		*fd_p = fd;
		rc = 0;
		break;
	}
	freeaddrinfo(res);
	if (rc)
		RPS_ERR("http: listen on %s:%u: %s", node ? node : "*", port, strerror(-rc));
	return rc;
}

int rps_http_start(const char *host, uint16_t port, const struct rps_http_opts *opts,
		   rps_http_handler_fn fn, void *arg, struct rps_http_server **srv_p)
{
	const char *node = host && *host && strcmp(host, "*") ? host : NULL;
	struct rps_http_server *srv;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : RPS_HTTP_TIMEOUT_MS;
	size_t max_request = opts && opts->max_request ? opts->max_request : RPS_HTTP_MAX_REQUEST;
	int max_clients = opts && opts->max_clients > 0 ? opts->max_clients : RPS_HTTP_MAX_CLIENTS;
	int fd = -1, rc;

	if (!fn)
		return -EINVAL;
	srv = rps_calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->fn = fn;
	srv->arg = arg;
	rc = http_listen(node, port, &fd);
	if (rc)
		goto err_free;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		srv->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
							   : ((struct sockaddr_in *)&ss)->sin_port);
	/* the daemon owns fd from here: MHD_stop_daemon closes it */
	srv->d = MHD_start_daemon(
	    MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, srv,
	    MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned int)max_clients, MHD_OPTION_CONNECTION_MEMORY_LIMIT, max_request,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)((timeout_ms + 999) / 1000),
	    MHD_OPTION_EXTERNAL_LOGGER, http_log, NULL, MHD_OPTION_END);
	if (!srv->d) {
		rc = errno ? -errno : -ENOMEM;
		RPS_ERR("http: cannot start the HTTP daemon on %s:%u: %s", node ? node : "*",
			srv->port, strerror(-rc));
		close(fd);
		goto err_free;
	}
	RPS_INFO("http: serving on %s:%u", node ? node : "*", srv->port);
	*srv_p = srv;
	return 0;

err_free:
	rps_free(srv);
	return rc;
}

uint16_t rps_http_port(const struct rps_http_server *srv)
{
	return srv->port;
}

void rps_http_stop(struct rps_http_server *srv)
{
	if (!srv)
		return;
	MHD_stop_daemon(srv->d);
	rps_free(srv);
}

int rps_http_metrics_handler(const char *path, void *arg, char **body_p, size_t *len_p,
			     const char **ctype_p)
{
	int rc;

	if (strcmp(path, "/metrics"))
		return -ENOENT;
	if (!arg)
		return -EINVAL;
	rc = rps_metrics_render(arg, body_p, len_p);
	if (rc)
		return rc;
	*ctype_p = RPS_METRICS_CONTENT_TYPE;
	return 0;
}
