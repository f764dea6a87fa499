/*
 * sdnotify.h - systemd's readiness protocol (sd_notify(3)), without
 * libsystemd: one datagram to $NOTIFY_SOCKET.  Nothing when egressd was
 * not started by systemd with Type=notify.
 */
#ifndef PX_SDNOTIFY_H
#define PX_SDNOTIFY_H

#include <stdbool.h>

/* Send `state` ("READY=1", "MAINPID=N\nREADY=1", "STOPPING=1").  With
 * `barrier`, wait (at most PX_SDNOTIFY_BARRIER_MS) until systemd has
 * taken it in, as sd_notify_barrier(3) does: an upgrade's successor names
 * itself the main process so before its predecessor may exit.  0, or -1
 * (no socket, or it could not be told; errno). */
int px_sdnotify(const char *state, bool barrier);

#define PX_SDNOTIFY_BARRIER_MS 5000

#endif
