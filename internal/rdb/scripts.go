package rdb

import "github.com/redis/go-redis/v9"

// script is one script of lua/, bound by name when the package loads: a
// handle names a file that exists, or the package panics at start.
type script struct {
	name  string
	rs    *redis.Script
	parts []part // where each line of its source comes from
	acked bool   // waits for replicas under SetReplicaAcks (not in unacked)
}

// handles lists every handle newScript made, so a test can tell that each
// script of lua/ has one.
var handles []*script

// newScript binds the script lua/name.lua.
func newScript(name string) *script {
	rs, ok := scripts[name]
	if !ok {
		panic("rdb: no script lua/" + name + ".lua")
	}
	s := &script{name: name, rs: rs, parts: scriptParts[name], acked: !unacked[name]}
	handles = append(handles, s)
	return s
}

//go:generate go run ./internal/scriptgen -lua lua -out scripts_gen.go

// The scripts of lua/, one handle each.
var (
	scriptAudit           = newScript("audit")
	scriptCancel          = newScript("cancel")
	scriptClaim           = newScript("claim")
	scriptDeleteQueue     = newScript("delete_queue")
	scriptDeleteTask      = newScript("delete_task")
	scriptDlqBulk         = newScript("dlq_bulk")
	scriptDlqOne          = newScript("dlq_one")
	scriptFinishDead      = newScript("finish_dead")
	scriptFinishHandback  = newScript("finish_handback")
	scriptFinishRetry     = newScript("finish_retry")
	scriptFinishSucceeded = newScript("finish_succeeded")
	scriptIngest          = newScript("ingest")
	scriptLeaseSecret     = newScript("lease_secret")
	scriptLimits          = newScript("limits")
	scriptListPage        = newScript("list_page")
	scriptLogPage         = newScript("log_page")
	scriptOpClaim         = newScript("op_claim")
	scriptOpFinish        = newScript("op_finish")
	scriptPause           = newScript("pause")
	scriptProgress        = newScript("progress")
	scriptPromote         = newScript("promote")
	scriptPruneConsumers  = newScript("prune_consumers")
	scriptPurgeBand       = newScript("purge_band")
	scriptPurgeKeys       = newScript("purge_keys")
	scriptPartitionQueue  = newScript("partition_queue")
	scriptReclaim         = newScript("reclaim")
	scriptRecount         = newScript("recount")
	scriptRegisterQueue   = newScript("register_queue")
	scriptRemoteBeat      = newScript("remote_beat")
	scriptRenew           = newScript("renew")
	scriptRunNow          = newScript("run_now")
	scriptScheduleDelete  = newScript("schedule_delete")
	scriptSchedulePause   = newScript("schedule_pause")
	scriptSchedulePut     = newScript("schedule_put")
	scriptScheduleRecord  = newScript("schedule_record")
	scriptSweepExpired    = newScript("sweep_expired")
	scriptTidy            = newScript("tidy")
	scriptUnregisterQueue = newScript("unregister_queue")
	scriptWorkerAdmit     = newScript("worker_admit")
	scriptWorkerBeat      = newScript("worker_beat")
	scriptWorkerForget    = newScript("worker_forget")
	scriptWorkerStart     = newScript("worker_start")
)
