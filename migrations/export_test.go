package migrations

// RenameDone exports renameDone to the tests.
var RenameDone = renameDone

// DistributedTarget exports distributedTarget to the tests.
var DistributedTarget = distributedTarget
