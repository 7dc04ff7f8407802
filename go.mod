module github.com/overtime-hpc/overtime

go 1.26.8
