module example.com/hello-rein

go 1.19
