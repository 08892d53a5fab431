module github.com/fila-go/fila

go 1.26.8
