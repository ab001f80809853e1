package migrations

// RenameDone exports renameDone to the tests.
var RenameDone = renameDone
