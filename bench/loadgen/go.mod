module omed.bench/loadgen

go 1.26
