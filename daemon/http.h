/* sumcastd's HTTP listener: /healthz, /metrics, /stats, /config. Main
 * thread (the event loop). */
#ifndef SUMCASTD_HTTP_H
#define SUMCASTD_HTTP_H

struct daemon;

/* Binds [http] listen/port unless [http] enabled is false. 0 or -errno. */
int http_start(struct daemon *d);
void http_stop(struct daemon *d);
/* After a SIGHUP: http.max-connections may have changed. */
void http_reloaded(struct daemon *d);

#endif
