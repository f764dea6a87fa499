/* task.h - waiting for Proxmox tasks (UPIDs). */
#ifndef SBX_TASK_H
#define SBX_TASK_H

#include <stddef.h>

#include "pve.h"

/* Poll GET /nodes/{node}/tasks/{upid}/status (node taken from the UPID)
 * with back-off until status is "stopped" or timeout_ms passes.  Returns 0
 * when exitstatus is "OK" or "WARNINGS: n"; otherwise -1 with the exit
 * status and the last lines of the task log in err. */
int sbx_task_wait(struct sbx_pve *p, const char *upid, long timeout_ms, char *err, size_t errlen);

/* Wait for the task whose UPID is the JSON string upid (as returned by an
 * asynchronous call); as sbx_task_wait(), and -1 when upid is no string. */
int sbx_task_wait_json(struct sbx_pve *p, json_t *upid, long timeout_ms, char *err, size_t errlen);

#endif
