/*
 * route_instances.c — GET /v1/instances (issue 23): the daemons that share
 * this one's store and their states (master/workers/instances.h), for
 * operators only: a tenant's principal learns nothing of the machines.
 */
#include "config.h"

#include <string.h>

#include "master/api/api.h"
#include "master/api/members.h"
#include "master/api/principal.h"
#include "master/workers/instances.h"

void
api_instances_route(struct api_req *rq)
{
    if (strcmp(rq->method, "GET") != 0) {
        api_error(rq, 405, "invalid_argument", "%s is not allowed on %s",
                  rq->method, rq->path);
        return;
    }
    if (api_scope_refuse(rq, API_OPERATE, NULL, "instance") ||
        api_members_none(rq, "instances") != 0)
        return;
    api_reply(rq, 200, json_pack("{s:o}", "instances", instances_json(rq->d)));
}
