module tlsprof.example/go

go 1.21
